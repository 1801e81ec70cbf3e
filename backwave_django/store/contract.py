"""The Storage Contract: what every store guarantees, whatever database is underneath.

Rules every implementation keeps:

1. Time is an input. Every time-dependent operation takes ``now``; no store reads a clock.
2. Every operation is one transaction: it happens whole or not at all.
3. Outcomes are fenced: a report applies only while the reporting worker still holds the lease for that
   Attempt and the lease has not expired at ``now`` (``expires_at > now``); otherwise nothing changes.
4. Bounds reject, never truncate (except failure detail, cut to 8 KiB).
5. Every state change follows ``core.states.TRANSITIONS``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..models import Job

from ..core.records import ClaimedJob, HeartbeatResult, OutcomeReport
from ..core.retry import RetryPolicy

MAX_WIRE_NAME_LENGTH = 128
MAX_QUEUE_NAME_LENGTH = 128
MAX_DETAIL_BYTES = 8192


class StoreError(Exception):
    """A request the store refuses; nothing was written."""


class PayloadTooLarge(StoreError):
    pass


class WireNameTooLong(StoreError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    wire_name: str
    payload: str
    queue: str = "default"
    due_at: datetime
    max_attempts: int = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportResult:
    applied: frozenset[int]
    stale: frozenset[int]


class CancelResult(enum.StrEnum):
    CANCELLED = "cancelled"  # it was pending: cancelled at once
    REQUESTED = "requested"  # it is running: the handler is asked to stop at its next heartbeat
    NOT_CANCELLABLE = "not_cancellable"  # terminal or unknown: nothing changed


class RequeueResult(enum.StrEnum):
    REQUEUED = "requeued"
    NOT_REQUEUEABLE = "not_requeueable"  # only dead-lettered and quarantined jobs can be requeued


class JobStore(Protocol):
    supports_transactional_enqueue: bool

    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[Job]:
        """Insert ``jobs`` in one round-trip and return them. Joins the caller's transaction, if any."""
        ...

    def claim(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        max_jobs: int,
        lease_duration: timedelta,
        now: datetime,
    ) -> list[ClaimedJob]:
        """Lease up to ``max_jobs`` due jobs, trying ``queues`` in order; each claim starts an Attempt."""
        ...

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        now: datetime,
        details: Mapping[int, str] | None = None,
    ) -> ReportResult:
        """Apply fenced outcomes in one transaction; ``details`` holds failure tracebacks by job id."""
        ...

    def heartbeat(
        self, *, worker_id: str, job_ids: Sequence[int], lease_duration: timedelta, now: datetime
    ) -> list[HeartbeatResult]:
        """Renew live leases this worker holds; say which were lost and which jobs should stop."""
        ...

    def expire_leases(
        self, *, queues: Sequence[str], max_jobs: int, retry: RetryPolicy, now: datetime
    ) -> int:
        """End lapsed Attempts (oldest first): retry with backoff, or dead-letter at the ceiling."""
        ...

    def release(self, *, worker_id: str, job_ids: Sequence[int], now: datetime) -> int:
        """Give jobs back at once (graceful shutdown) without charging their attempt."""
        ...

    def cancel(self, job_id: int, *, actor: str, now: datetime) -> CancelResult: ...

    def requeue(self, job_id: int, *, actor: str, now: datetime) -> RequeueResult: ...

    def pause_queue(self, queue: str, *, actor: str, now: datetime) -> None: ...

    def resume_queue(self, queue: str, *, actor: str, now: datetime) -> None: ...

    def set_concurrency_limit(self, queue: str, limit: int | None, *, actor: str, now: datetime) -> None: ...

    def next_due(self, queues: Sequence[str], *, now: datetime) -> datetime | None:
        """The earliest due time of scheduled work in non-paused ``queues``; ``now`` if some is due."""
        ...

    def count_live(self, queues: Sequence[str]) -> int:
        """Jobs in ``queues`` that are not terminal yet."""
        ...
