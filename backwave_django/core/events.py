"""Events: facts the Shell feeds the Node Driver. Each carries ``now``, the time it happened."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .records import ClaimedJob, HeartbeatResult


@dataclass(frozen=True, slots=True, kw_only=True)
class PollDue:
    """A poll tick, a wake-up hint, or an obeyed RequestPoll."""

    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimCompleted:
    """Exactly one per issued ClaimBatch: with the jobs claimed, none, or ``failed`` when the call raised."""

    now: datetime
    jobs: tuple[ClaimedJob, ...] = ()
    failed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSucceeded:
    now: datetime
    job_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionFailed:
    """The handler raised (its own timeouts included). ``message`` is short; detail stays in the Shell."""

    now: datetime
    job_id: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionCancelled:
    """The handler stopped because an operator asked it to."""

    now: datetime
    job_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionUnroutable:
    """No handler for the wire name, or the payload no longer decodes. Never reaches a handler."""

    now: datetime
    job_id: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomesReported:
    """The result of a ReportOutcomes: the ids whose write applied; the rest were fenced off as stale.

    ``failed`` means the write itself raised: the outcomes are lost and their leases will lapse.
    """

    now: datetime
    applied: frozenset[int] = frozenset()
    stale: frozenset[int] = frozenset()
    failed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatDue:
    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatCompleted:
    now: datetime
    results: tuple[HeartbeatResult, ...] = ()
    failed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceDue:
    """The maintenance ticker fired. It runs whether or not the pool is full."""

    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasesExpired:
    """An ExpireLeases finished: ``count`` leases were disposed (retried or dead-lettered)."""

    now: datetime
    count: int
    failed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ShutdownRequested:
    """Stop claiming; let running handlers finish until GraceExpired."""

    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class GraceExpired:
    """The shutdown grace period is over: give back whatever is still running."""

    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class LeasesReleased:
    now: datetime
    failed: bool = False


Event = (
    PollDue
    | ClaimCompleted
    | ExecutionSucceeded
    | ExecutionFailed
    | ExecutionCancelled
    | ExecutionUnroutable
    | OutcomesReported
    | HeartbeatDue
    | HeartbeatCompleted
    | MaintenanceDue
    | LeasesExpired
    | ShutdownRequested
    | GraceExpired
    | LeasesReleased
)
