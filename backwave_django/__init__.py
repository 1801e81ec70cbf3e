"""backwave-django: durable background jobs stored in your Django database.

The public API is what this module lists in ``__all__``. Importing it before ``django.setup()`` is safe: it
never imports models.
"""

from typing import Any

from .context import AttemptScope, JobCancelled, JobContext, NoOutput
from .core.dependencies import MAX_PARENTS, RunOn
from .core.tags import TagError
from .registry import JobDefinitionError, JobFunction, JobRegistration, UnknownJob, job, registry
from .store.contract import UnknownParent
from .workflows import MAX_GRAPH_JOBS, Step, chain, group

_OPERATIONS = (
    "cancel_job",
    "requeue_job",
    "pause_queue",
    "resume_queue",
    "set_concurrency_limit",
    "pause_schedule",
    "resume_schedule",
    "trigger_schedule",
)


def __getattr__(name: str) -> Any:
    """The operator actions load the store (and models) only when first used, after django.setup()."""
    if name in _OPERATIONS:
        from . import operations

        return getattr(operations, name)

    raise AttributeError(f"module 'backwave_django' has no attribute {name!r}")


__all__ = [
    "MAX_GRAPH_JOBS",
    "MAX_PARENTS",
    "AttemptScope",
    "JobCancelled",
    "JobContext",
    "JobDefinitionError",
    "JobFunction",
    "JobRegistration",
    "NoOutput",
    "RunOn",
    "Step",
    "TagError",
    "UnknownJob",
    "UnknownParent",
    "cancel_job",
    "chain",
    "group",
    "job",
    "pause_queue",
    "pause_schedule",
    "registry",
    "requeue_job",
    "resume_queue",
    "resume_schedule",
    "set_concurrency_limit",
    "trigger_schedule",
]
