"""Commands: orders the Node Driver gives the Shell. The Shell obeys each one and feeds back an event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from .records import ClaimedJob, OutcomeReport
from .retry import RetryPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimBatch:
    """Lease up to ``max_jobs`` due jobs from ``queues``, in that order. Answer with one ClaimCompleted."""

    queues: tuple[str, ...]
    max_jobs: int
    lease_duration: timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteJob:
    """Route the job and run its handler off the loop; answer with one Execution* event."""

    job: ClaimedJob


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportOutcomes:
    """Write these outcomes, each fenced on (worker, attempt); answer with OutcomesReported."""

    reports: tuple[OutcomeReport, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """Renew the leases of running jobs; answer with HeartbeatCompleted."""

    job_ids: tuple[int, ...]
    lease_duration: timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireLeases:
    """End Attempts whose leases lapsed in ``queues`` (at most ``max_jobs``); answer with LeasesExpired."""

    queues: tuple[str, ...]
    max_jobs: int
    retry: RetryPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalCancellation:
    """An operator asked to cancel this running job: fire its cancellation signal."""

    job_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AbandonExecution:
    """This worker lost the job's lease: fire its cancellation signal and drop whatever it reports later."""

    job_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseLeases:
    """Shutdown: give these jobs back to the queue at once, without charging an attempt."""

    job_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPoll:
    """Queue a PollDue at the back of the event queue (never run inline)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """Shutdown is complete: nothing runs, nothing is buffered. The loop may end."""


Command = (
    ClaimBatch
    | ExecuteJob
    | ReportOutcomes
    | Heartbeat
    | ExpireLeases
    | SignalCancellation
    | AbandonExecution
    | ReleaseLeases
    | RequestPoll
    | Stop
)
