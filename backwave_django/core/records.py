"""Plain values that cross the boundary between the store and the Core."""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from .values import value


@value
class ClaimedJob:
    """A job as a claim returns it: leased to this worker for Attempt number ``attempt``.

    ``timeout`` is the job's own time limit per Attempt (None: the group's).
    """

    id: int
    wire_name: str
    queue: str
    payload: str
    attempt: int
    max_attempts: int
    due_at: datetime
    timeout: timedelta | None = None
    scheduled_for: datetime | None = None  # the tick a schedule minted it for
    created_at: datetime | None = None  # when it was enqueued
    trace_context: str = ""  # the W3C trace context it was enqueued in, as JSON; empty: none


class OutcomeKind(enum.StrEnum):
    """How an Attempt ended, as recorded in the outcome log."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"  # retried later, or dead-lettered at the ceiling
    CANCELLED = "cancelled"
    UNROUTABLE = "unroutable"
    EXPIRED = "expired"  # the lease lapsed before an outcome was reported
    RELEASED = "released"  # given back at shutdown; does not count against max_attempts


class AuditAction(enum.StrEnum):
    """An operator action, as its audit record names it."""

    CANCEL = "cancel"
    REQUEUE = "requeue"
    PAUSE_QUEUE = "pause_queue"
    RESUME_QUEUE = "resume_queue"
    SET_CONCURRENCY_LIMIT = "set_concurrency_limit"
    PAUSE_SCHEDULE = "pause_schedule"
    RESUME_SCHEDULE = "resume_schedule"
    TRIGGER_SCHEDULE = "trigger_schedule"


@value
class OutcomeReport:
    """One fenced outcome write: applies only if the worker still holds Attempt ``attempt`` of the job.

    ``message`` is the short reason (an error's first line, or why a job is unroutable); ``max_attempts`` is
    the job's ceiling as claimed, which decides with the retry policy whether a failure runs again.
    """

    job_id: int
    attempt: int
    kind: OutcomeKind
    max_attempts: int
    message: str = ""


@value
class HeartbeatResult:
    job_id: int
    renewed: bool
    cancel_requested: bool
