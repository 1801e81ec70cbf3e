"""A job as Django's ``TaskResult``: the status mapping, and the timestamps, workers and errors of Attempts.

| backwave state                              | ``TaskResultStatus`` |
| ------------------------------------------- | -------------------- |
| scheduled, awaiting_parent                  | READY                |
| leased                                      | RUNNING              |
| succeeded                                   | SUCCESSFUL           |
| dead_lettered, quarantined, cancelled       | FAILED               |

``worker_ids`` has one entry per Attempt (a release at shutdown is not an Attempt), so ``attempts`` is the
Attempt number; ``errors`` one per failed Attempt, with the exception's class and traceback (an expired lease,
a time limit or an unroutable row name a class of :mod:`backwave_django.tasks.errors` instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.tasks.base import TaskError, TaskResult, TaskResultStatus

from .. import codec
from ..core.records import OutcomeKind
from ..core.states import State
from ..store import get_store
from ..store.contract import OutcomeView
from .errors import AttemptFailed, LeaseExpired, TaskUnroutable

if TYPE_CHECKING:
    from .backend import BackwaveBackend

STATUSES: dict[State, TaskResultStatus] = {
    State.SCHEDULED: TaskResultStatus.READY,
    State.AWAITING_PARENT: TaskResultStatus.READY,
    State.LEASED: TaskResultStatus.RUNNING,
    State.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    State.DEAD_LETTERED: TaskResultStatus.FAILED,
    State.QUARANTINED: TaskResultStatus.FAILED,
    State.CANCELLED: TaskResultStatus.FAILED,
}

#: The Attempts that failed, and the class a TaskError names when no exception of the task's own did.
_FAILED_KINDS: dict[OutcomeKind, type[Exception]] = {
    OutcomeKind.FAILED: AttemptFailed,
    OutcomeKind.EXPIRED: LeaseExpired,
    OutcomeKind.UNROUTABLE: TaskUnroutable,
}


def _path(kind: type[Exception]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _error(outcome: OutcomeView) -> TaskError:
    fallback = _FAILED_KINDS[outcome.kind]
    return TaskError(
        exception_class_path=outcome.error_type or _path(fallback),
        traceback=outcome.detail or f"{fallback.__name__}: {outcome.message}\n",
    )


def read_result(backend: BackwaveBackend, job_id: int) -> TaskResult[Any, Any] | None:
    """The job's TaskResult now, or None if there is no such job or it is not one of this backend's tasks."""
    store = get_store()
    job = store.get_job(job_id)
    if job is None:
        return None
    task = backend.known_task(job.wire_name, job.queue, job.priority)
    if task is None:
        return None
    try:
        arguments = codec.decode(job.payload)
    except codec.PayloadDecodeError:
        arguments = {}
    lease = store.get_lease(job_id) if job.state is State.LEASED else None
    # One Outcome per counted Attempt; a requeue starts the count again, so the Attempts of this run are
    # the last ``job.attempt`` of them (the running one is the lease's, not an Outcome yet).
    ended = [o for o in store.list_outcomes(job_id) if o.kind is not OutcomeKind.RELEASED]
    this_run = job.attempt - (lease is not None)
    attempts = ended[len(ended) - this_run :] if this_run > 0 else []
    starts = [o.started_at for o in attempts if o.started_at is not None]
    if lease is not None:
        starts.append(lease.claimed_at)
    result: TaskResult[Any, Any] = TaskResult(
        task=task,
        id=str(job.id),
        status=STATUSES[job.state],
        enqueued_at=job.created_at,
        started_at=starts[0] if starts else None,
        last_attempted_at=starts[-1] if starts else None,
        finished_at=job.terminal_at,
        args=list(arguments.get("args", [])),
        kwargs=dict(arguments.get("kwargs", {})),
        backend=backend.alias,
        errors=[_error(o) for o in attempts if o.kind in _FAILED_KINDS],
        worker_ids=[o.worker for o in attempts] + ([lease.owner] if lease is not None else []),
    )
    if job.state is State.SUCCEEDED and job.output is not None:
        object.__setattr__(result, "_return_value", codec.decode_value(job.output))
    return result
