"""Events: facts the Shell feeds the Node Driver. Each carries ``now``, the time it happened."""

from __future__ import annotations

from datetime import datetime, timedelta

from .records import ClaimedJob, HeartbeatResult
from .schedules import ScheduleState
from .values import value


@value
class PollDue:
    """A poll tick, a wake-up hint, or an obeyed RequestPoll."""

    now: datetime


@value
class Idle:
    """The Shell has no event waiting: a burst of work has been absorbed."""

    now: datetime


@value
class ClaimCompleted:
    """Exactly one per issued ClaimBatch: with the jobs claimed, none, or ``failed`` when the call raised."""

    now: datetime
    jobs: tuple[ClaimedJob, ...] = ()
    failed: bool = False


@value
class ExecutionSucceeded:
    """The handler returned."""

    now: datetime
    job_id: int


@value
class ExecutionFailed:
    """The handler raised (anything, its own timeouts and a JobCancelled included). ``message`` is the short
    reason; the traceback stays in the Shell."""

    now: datetime
    job_id: int
    message: str


@value
class ExecutionUnroutable:
    """No handler for the wire name, or the payload no longer decodes or fits it. Never reaches a handler."""

    now: datetime
    job_id: int
    reason: str


@value
class OutcomesReported:
    """The result of a ReportOutcomes: the ids whose write applied; the rest were fenced off as stale.

    ``failed`` means the write itself raised (a transient fault): nothing was written, and the reports are
    kept to be written again while their leases hold. ``opened``: the write may have made work claimable at
    once (``ReportResult.opened``).
    """

    now: datetime
    applied: frozenset[int] = frozenset()
    stale: frozenset[int] = frozenset()
    failed: bool = False
    opened: bool = True


@value
class HeartbeatDue:
    now: datetime


@value
class HeartbeatCompleted:
    now: datetime
    results: tuple[HeartbeatResult, ...] = ()
    failed: bool = False


@value
class MaintenanceDue:
    """The maintenance ticker fired. It runs whether or not the pool is full. ``leases_lapsed`` is False
    when the Shell knows that no lease in the served queues has lapsed (the test pump, which can look), so
    there is nothing to sweep; the Pump cannot know, and always says True."""

    now: datetime
    leases_lapsed: bool = True


@value
class LeasesExpired:
    """An ExpireLeases finished: ``count`` leases were disposed (retried, dead-lettered or cancelled)."""

    now: datetime
    count: int
    failed: bool = False


@value
class SchedulesLoaded:
    """A LoadSchedules finished: the schedules of the served queues, where their cursors stand."""

    now: datetime
    schedules: tuple[ScheduleState, ...] = ()
    failed: bool = False


@value
class SchedulesMinted:
    """A MintSchedules finished: ``minted`` jobs were inserted (ticks another node minted first are not)."""

    now: datetime
    minted: int = 0
    failed: bool = False


@value
class FinishedPurged:
    """A PurgeFinished finished: ``count`` finished jobs were deleted."""

    now: datetime
    count: int = 0
    failed: bool = False


@value
class TimerFired:
    """The time a WakeAt asked for has come."""

    now: datetime


@value
class StoreFaulted:
    """A store call raised. ``transient``: the store says a retry may cure it (degrade); otherwise halt."""

    now: datetime
    transient: bool
    detail: str


@value
class ThreadsAbandoned:
    """Handler threads that were abandoned (timed out, lease lost, shutdown) and still run: ``running`` of
    them, of which ``unreplaced`` could not be replaced in the pool (their slots are lost until they end)."""

    now: datetime
    running: int
    unreplaced: int


@value
class ShutdownRequested:
    """Stop claiming; let running handlers finish for ``grace``, then stop them and give their jobs back."""

    now: datetime
    grace: timedelta


Event = (
    PollDue
    | Idle
    | ClaimCompleted
    | ExecutionSucceeded
    | ExecutionFailed
    | ExecutionUnroutable
    | OutcomesReported
    | HeartbeatDue
    | HeartbeatCompleted
    | MaintenanceDue
    | LeasesExpired
    | SchedulesLoaded
    | SchedulesMinted
    | FinishedPurged
    | TimerFired
    | StoreFaulted
    | ThreadsAbandoned
    | ShutdownRequested
)
