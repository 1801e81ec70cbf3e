"""backwave-django: durable background jobs stored in your Django database.

The public API is what this module lists in ``__all__``. Importing it before ``django.setup()`` is safe: it
never imports models.
"""

from .context import AttemptScope, JobCancelled, JobContext
from .registry import JobDefinitionError, JobFunction, JobRegistration, UnknownJob, job, registry

__all__ = [
    "AttemptScope",
    "JobCancelled",
    "JobContext",
    "JobDefinitionError",
    "JobFunction",
    "JobRegistration",
    "UnknownJob",
    "job",
    "registry",
]
