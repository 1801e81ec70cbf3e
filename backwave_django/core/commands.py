"""Commands: orders the Node Driver gives the Shell. The Shell obeys each one and feeds back an event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .health import Health
from .records import ClaimedJob, OutcomeReport
from .retention import PurgeRule
from .retry import RetryPolicy
from .schedules import MintDecision


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimBatch:
    """Lease up to ``max_jobs`` due jobs from ``queues``, in that order. Answer with one ClaimCompleted."""

    queues: tuple[str, ...]
    max_jobs: int
    lease_duration: timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteJob:
    """Route the job and run its handler off the loop; answer with one Execution* event.

    ``cut_off_at`` is when the Driver gives the handler up if it is still running (its time limit plus the
    grace; None without a limit). The shell cuts the handler off from the database then even if its own loop
    is held up: a transaction the handler holds open on SQLite blocks every other writer, the Pump's store
    calls among them, until it is cut off."""

    job: ClaimedJob
    cut_off_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportOutcomes:
    """Write these outcomes, each fenced on (worker, attempt); answer with OutcomesReported.
    ``retry`` decides (through ``core.transitions``) whether a failure runs again."""

    reports: tuple[OutcomeReport, ...]
    retry: RetryPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """Renew the leases of running jobs and of outcomes not yet written; answer with HeartbeatCompleted."""

    job_ids: tuple[int, ...]
    lease_duration: timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireLeases:
    """End Attempts whose leases lapsed in ``queues`` (at most ``max_jobs``); answer with LeasesExpired."""

    queues: tuple[str, ...]
    max_jobs: int
    retry: RetryPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadSchedules:
    """Read the schedules of ``queues`` (not removed); answer with SchedulesLoaded."""

    queues: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MintSchedules:
    """Carry out these decisions, each only if its schedule's cursor is still where it was read; answer with
    SchedulesMinted."""

    decisions: tuple[MintDecision, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeFinished:
    """Delete finished jobs by these rules, at most ``max_jobs``, oldest first; answer with FinishedPurged."""

    rules: tuple[PurgeRule, ...]
    max_jobs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalCancellation:
    """Ask a running handler to stop (``context.cancelled`` becomes true); it keeps its lease meanwhile."""

    job_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AbandonExecution:
    """Stop waiting for this handler: fire its cancellation signal, cut it off from the database (nothing
    it does from now on is committed), and drop whatever it reports later. Done before its lease is given
    up."""

    job_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPoll:
    """Queue a PollDue at the back of the event queue (never run inline)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WakeAt:
    """Send a TimerFired at ``at`` (it replaces any earlier WakeAt)."""

    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordStatus:
    """Write this Pump's health and heartbeat time for ``backwave_health`` and the admin."""

    health: Health
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Halt:
    """A fault that no retry can cure: stop this Pump now (its leases lapse, other nodes take the work)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """Shutdown is complete: nothing runs, nothing is buffered. The loop may end."""


Command = (
    ClaimBatch
    | ExecuteJob
    | ReportOutcomes
    | Heartbeat
    | ExpireLeases
    | LoadSchedules
    | MintSchedules
    | PurgeFinished
    | SignalCancellation
    | AbandonExecution
    | RequestPoll
    | WakeAt
    | RecordStatus
    | Halt
    | Stop
)
