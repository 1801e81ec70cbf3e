"""Commands: orders the Node Driver gives the Shell. The Shell obeys each one and feeds back an event."""

from __future__ import annotations

from datetime import datetime, timedelta

from .health import Health
from .records import ClaimedJob, OutcomeReport
from .retention import PurgeRule
from .retry import RetryPolicy
from .schedules import MintDecision
from .values import value


@value
class ClaimBatch:
    """Lease up to ``max_jobs`` due jobs from ``queues``, in that order. Answer with one ClaimCompleted."""

    queues: tuple[str, ...]
    max_jobs: int
    lease_duration: timedelta


@value
class ExecuteJob:
    """Route the job and run its handler off the loop; answer with one Execution* event.

    ``cut_off_at`` is when the Driver gives the handler up if it is still running (its time limit plus the
    grace; None without a limit). The shell cuts the handler off from the database then even if its own loop
    is held up: a transaction the handler holds open on SQLite blocks every other writer, the Pump's store
    calls among them, until it is cut off."""

    job: ClaimedJob
    cut_off_at: datetime | None = None


@value
class ReportOutcomes:
    """Write these outcomes, each fenced on (worker, attempt); answer with OutcomesReported.
    ``retry`` decides (through ``core.transitions``) whether a failure runs again."""

    reports: tuple[OutcomeReport, ...]
    retry: RetryPolicy


@value
class Heartbeat:
    """Renew the leases of running jobs and of outcomes not yet written; answer with HeartbeatCompleted."""

    job_ids: tuple[int, ...]
    lease_duration: timedelta


@value
class ExpireLeases:
    """End Attempts whose leases lapsed in ``queues`` (at most ``max_jobs``); answer with LeasesExpired."""

    queues: tuple[str, ...]
    max_jobs: int
    retry: RetryPolicy


@value
class LoadSchedules:
    """Read the schedules of ``queues`` (not removed); answer with SchedulesLoaded."""

    queues: tuple[str, ...]


@value
class MintSchedules:
    """Carry out these decisions, each only if its schedule's cursor is still where it was read; answer with
    SchedulesMinted."""

    decisions: tuple[MintDecision, ...]


@value
class PurgeFinished:
    """Delete finished jobs by these rules, at most ``max_jobs``, oldest first; answer with FinishedPurged."""

    rules: tuple[PurgeRule, ...]
    max_jobs: int


@value
class SignalCancellation:
    """Ask a running handler to stop (``context.cancelled`` becomes true); it keeps its lease meanwhile."""

    job_id: int


@value
class AbandonExecution:
    """Stop waiting for this handler: fire its cancellation signal, cut it off from the database (nothing
    it does from now on is committed), and drop whatever it reports later. Done before its lease is given
    up."""

    job_id: int


@value
class RequestPoll:
    """Queue a PollDue at the back of the event queue (never run inline)."""


@value
class WakeAt:
    """Send a TimerFired at ``at`` (it replaces any earlier WakeAt)."""

    at: datetime


@value
class RecordStatus:
    """Write this Pump's health and heartbeat time for ``backwave_health`` and the admin."""

    health: Health
    detail: str


@value
class Halt:
    """A fault that no retry can cure: stop this Pump now (its leases lapse, other nodes take the work)."""

    reason: str


@value
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
