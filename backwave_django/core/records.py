"""Plain values that cross the boundary between the store and the Core."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedJob:
    """A job as a claim returns it: leased to this worker for Attempt number ``attempt``."""

    id: int
    wire_name: str
    queue: str
    payload: str
    attempt: int
    max_attempts: int
    due_at: datetime


class OutcomeKind(enum.StrEnum):
    """How an Attempt ended, as recorded in the outcome log."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"  # retried later, or dead-lettered at the ceiling
    CANCELLED = "cancelled"
    UNROUTABLE = "unroutable"
    EXPIRED = "expired"  # the lease lapsed before an outcome was reported
    RELEASED = "released"  # given back at shutdown; does not count against max_attempts


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeReport:
    """One fenced outcome write: applies only if ``worker_id`` still holds Attempt ``attempt`` of the job.

    ``retry_at`` is set only for a failure that will run again; a failure without it dead-letters.
    ``message`` is the short reason (an error's first line, or why a job is unroutable).
    """

    job_id: int
    attempt: int
    kind: OutcomeKind
    retry_at: datetime | None = None
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResult:
    job_id: int
    renewed: bool
    cancel_requested: bool
