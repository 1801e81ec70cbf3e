"""The Storage Contract: what every store guarantees, whatever holds the jobs.

Rules every implementation keeps (the conformance suite, ``tests/contract``, checks each one against every
store: the in-memory one, ``store/memory.py``; the portable Django store, ``store/django.py`` with its
schedules and retention, on SQLite and PostgreSQL; the PostgreSQL one, ``store/postgres.py``; and the MariaDB
one, ``store/mysql.py``. The simulator, ``simulation/``, and the benchmark, ``bench/``, use them through this
contract too):

1. Time is an input. Every time-dependent operation takes ``now``; no store reads a clock.
2. Every operation is one transaction: it happens whole or not at all.
3. Outcomes are fenced: a report applies only while the reporting worker still holds the lease for that
   Attempt and the lease has not expired at ``now`` (``expires_at > now``); otherwise nothing changes.
4. Bounds reject, never truncate, on the way in (enqueue). Text a worker writes on the way out (messages,
   causes, tracebacks, health details) is cleaned and cut by ``core.text.clean`` to the bounds below.
5. Every state change is decided by ``core.transitions`` and checked against ``core.states.TRANSITIONS``; an
   illegal move (a claim, a report, a sweep, a cancel, a requeue, a purge of a state that is not final)
   raises :class:`StoreError` and writes nothing.
6. Only plain values cross the contract: the dataclasses here and in ``core.records``, never ORM objects.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from ..core.dependencies import MAX_PARENTS, Resolution, RunOn
from ..core.health import Health
from ..core.names import MAX_QUEUE_NAME_LENGTH, MAX_UNIQUE_KEY_LENGTH, MAX_WIRE_NAME_LENGTH
from ..core.records import ClaimedJob, HeartbeatResult, OutcomeKind, OutcomeReport
from ..core.retention import PurgeRule
from ..core.retry import MAX_ATTEMPTS_LIMIT, RetryPolicy
from ..core.schedules import Cadence, MintDecision, Misfire, ScheduleState, Walkers
from ..core.states import State
from ..core.text import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES
from ..core.values import value

#: A Pump's health detail, in bytes.
MAX_HEALTH_DETAIL_BYTES = 2000
#: The largest concurrency limit a queue may have.
MAX_CONCURRENCY_LIMIT = 1_000_000
#: Job ids are 64-bit.
MAX_JOB_ID = 2**63 - 1
#: A job's priority: higher is claimed first within its queue (Django's Tasks use the same range).
MIN_PRIORITY, MAX_PRIORITY = -100, 100
#: A job's trace context (``traceparent`` and ``tracestate`` as JSON), in bytes: W3C's tracestate is at most
#: 512 characters, so this leaves room and no more.
MAX_TRACE_CONTEXT_BYTES = 1024

__all__ = [
    "MAX_ATTEMPTS_LIMIT",
    "MAX_CONCURRENCY_LIMIT",
    "MAX_DETAIL_BYTES",
    "MAX_HEALTH_DETAIL_BYTES",
    "MAX_JOB_ID",
    "MAX_MESSAGE_BYTES",
    "MAX_PARENTS",
    "MAX_PRIORITY",
    "MAX_QUEUE_NAME_LENGTH",
    "MAX_TRACE_CONTEXT_BYTES",
    "MAX_UNIQUE_KEY_LENGTH",
    "MAX_WIRE_NAME_LENGTH",
    "MIN_PRIORITY",
    "AuditView",
    "CancelResult",
    "EdgeView",
    "EnqueuedJob",
    "JobStore",
    "JobView",
    "LeaseView",
    "NewJob",
    "OutcomeDetail",
    "OutcomeView",
    "PayloadTooLarge",
    "PumpView",
    "QueueView",
    "ReportResult",
    "RequeueResult",
    "ScheduleDefinition",
    "ScheduleView",
    "StoreError",
    "SyncResult",
    "TriggerResult",
    "UnknownParent",
    "WireNameTooLong",
]


class StoreError(Exception):
    """A request the store refuses; nothing was written."""


class PayloadTooLarge(StoreError):
    pass


class WireNameTooLong(StoreError):
    pass


class UnknownParent(StoreError):
    """A new job names a parent that does not exist (never enqueued, or purged); nothing was written."""

    def __init__(self, missing: Sequence[int]) -> None:
        self.missing = tuple(sorted(missing))
        shown = ", ".join(map(str, self.missing[:10])) + (", ..." if len(self.missing) > 10 else "")
        super().__init__(
            f"no job with id {shown} exists to depend on (never enqueued, or purged by retention); "
            "nothing was enqueued. Enqueue the parent first, or leave it out of depends_on."
        )


@value
class NewJob:
    """One job for :meth:`JobStore.enqueue`, its arguments already encoded as JSON text (``payload``).

    Every field but ``timeout`` is required: the defaults (the job's queue, ``BACKWAVE['MAX_ATTEMPTS']``) are
    the caller's to apply, from ``conf`` and the job's registration, so no store holds a copy of them."""

    wire_name: str
    payload: str
    queue: str
    due_at: datetime
    max_attempts: int
    timeout: timedelta | None = None  #: the job's own time limit per Attempt; None: its group's
    priority: int = 0  #: higher is claimed first within the queue
    unique_key: str | None = None  #: at most one unfinished job of this wire name holds the key
    #: The W3C trace context it is enqueued in, as JSON (``backwave_django.telemetry`` writes it); "": none.
    trace_context: str = ""
    #: Its tags in their stored form (``core.tags.normalise_all`` gives them), each once.
    tags: tuple[str, ...] = ()
    #: The ids of the jobs it waits on (each must exist; at most ``MAX_PARENTS``), and when it may start.
    parents: tuple[int, ...] = ()
    run_on: RunOn = RunOn.SUCCESS


@value
class EnqueuedJob:
    """One enqueued job, in the order the jobs were given: its id, and whether it is an unfinished job that
    already held the new job's unique key (``duplicate``: nothing was written for it)."""

    id: int
    duplicate: bool = False
    #: The state it was born in (a job with parents may wait, or be cancelled by a failed parent), and the
    #: parents it still waits on.
    state: State = State.SCHEDULED
    parents_remaining: int = 0
    terminal_cause: str = ""


@value
class OutcomeDetail:
    """What the Shell knows of an ended Attempt besides its outcome, written with it under the same fence:
    a failure's traceback and exception class (a dotted path), a success's return value (JSON text), and
    the tags the Attempt added (stored forms; added whatever the outcome, only if it passes the fence)."""

    traceback: str = ""
    error_type: str = ""
    output: str | None = None
    tags: tuple[str, ...] = ()


@value
class ReportResult:
    """What :meth:`JobStore.report` did: the job ids whose outcome was written (``applied``) and those fenced
    off as ``stale``. ``opened``: the report may have made work claimable at once (it scheduled a job due now,
    as a retry without delay or a job given back, it ended a job that others depend on, or it freed a slot of
    a queue with a concurrency limit), so the Pump looks again before its next poll; a store that cannot tell
    says True."""

    applied: frozenset[int]
    stale: frozenset[int]
    opened: bool = True


class CancelResult(enum.StrEnum):
    CANCELLED = "cancelled"  #: it was pending: cancelled at once
    REQUESTED = "requested"  #: it is running: the handler is asked to stop at its next heartbeat
    NOT_CANCELLABLE = "not_cancellable"  #: terminal or unknown: nothing changed


class RequeueResult(enum.StrEnum):
    REQUEUED = "requeued"
    NOT_REQUEUEABLE = "not_requeueable"  #: only dead-lettered and quarantined jobs can be requeued
    KEY_TAKEN = "key_taken"  #: an unfinished job of the same wire name holds its unique key now


class TriggerResult(enum.StrEnum):
    TRIGGERED = "triggered"  # one job, due now, for the tick "now"; the cursor does not move
    NOT_FOUND = "not_found"  # no such schedule, or it was removed from the settings


@value
class ScheduleDefinition:
    """A schedule as the settings declare it, ready to store: the job each tick mints (with its arguments
    encoded, its queue, attempt ceiling and time limit) and when it ticks."""

    name: str
    wire_name: str
    queue: str
    payload: str
    cron: str  # empty for an EVERY schedule
    every: timedelta | None
    timezone: str
    misfire: Misfire
    no_overlap: bool
    max_attempts: int
    timeout: timedelta | None

    @property
    def cadence(self) -> Cadence:
        return Cadence(cron=self.cron, every=self.every, timezone=self.timezone)


@value
class SyncResult:
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]


# -- what the reads return ----------------------------------------------------------------------------


@value
class JobView:
    id: int
    wire_name: str
    queue: str
    payload: str
    state: State
    attempt: int
    max_attempts: int
    due_at: datetime
    created_at: datetime
    terminal_at: datetime | None
    terminal_cause: str
    cancel_requested: bool
    timeout: timedelta | None = None
    schedule: str | None = None
    scheduled_for: datetime | None = None
    priority: int = 0
    unique_key: str | None = None
    output: str | None = None  #: the return value of the Attempt that succeeded, as JSON text
    trace_context: str = ""
    run_on: RunOn = RunOn.SUCCESS
    parents_remaining: int = 0  #: parents not finished yet (the job is awaiting_parent until none)


@value
class EdgeView:
    """One dependency edge, with both ends' states now: resolved once, when the parent finished."""

    parent_id: int
    child_id: int
    parent_state: State
    child_state: State
    resolved_at: datetime | None
    resolution: Resolution | None


@value
class LeaseView:
    job_id: int
    queue: str
    owner: str
    attempt: int
    claimed_at: datetime
    expires_at: datetime


@value
class OutcomeView:
    job_id: int
    attempt: int
    worker: str
    kind: OutcomeKind
    state_after: State
    message: str
    detail: str
    recorded_at: datetime
    error_type: str = ""  #: a failure's exception class, as a dotted path
    started_at: datetime | None = None  #: when the Attempt began (its claim)


@value
class AuditView:
    actor: str
    action: str
    target: str
    detail: str
    recorded_at: datetime


@value
class QueueView:
    queue: str
    paused: bool
    concurrency_limit: int | None


@value
class ScheduleView:
    """A stored schedule and where it stands."""

    definition: ScheduleDefinition
    cursor: datetime
    paused: bool
    removed_at: datetime | None
    skipped_count: int
    recent_skips: tuple[datetime, ...]
    last_run_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @property
    def name(self) -> str:
        return self.definition.name

    def next_run(self, walkers: Walkers | None = None) -> datetime | None:
        """The next tick it will mint at, or None while paused or removed."""
        if self.paused or self.removed_at is not None:
            return None
        return self.definition.cadence.next_after(self.cursor, walkers)


@value
class PumpView:
    worker_id: str
    group: str
    host: str
    pid: int
    queues: tuple[str, ...]
    health: Health
    detail: str
    started_at: datetime
    last_beat_at: datetime


class MakesEveryJobFirst:
    """``enqueue_in_parts`` for a store that writes nothing before every job is made: it asks for them all at
    once, then makes one ``enqueue``."""

    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[EnqueuedJob]:
        raise NotImplementedError  # the store's own

    def enqueue_in_parts(
        self,
        count: int,
        make: Callable[[int, int], Sequence[NewJob]],
        *,
        now: datetime,
        max_payload_bytes: int,
    ) -> list[EnqueuedJob]:
        return self.enqueue(make(0, count), now=now, max_payload_bytes=max_payload_bytes)


class JobStore(Protocol):
    """Every operation the Shell, the operator functions, the admin's actions and the test pump use."""

    using: str  #: the Django database alias, or a name for stores without one
    supports_transactional_enqueue: bool
    #: The database takes one writer at a time (SQLite): a backlog never adds a Pump (``core.elastic``), since
    #: a second Pump's writes would only wait for the first's.
    one_writer_at_a_time: bool

    # -- jobs in ------------------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[EnqueuedJob]:
        """Insert ``jobs`` in one transaction (the caller's, if one is open) and return their ids in order.
        Bounds are checked first; a bad job refuses the whole batch and nothing is written. A job whose
        unique key an unfinished job of its wire name holds (one stored before, or earlier in ``jobs``) is
        not written: that job's id comes back, marked ``duplicate``."""
        ...

    def enqueue_in_parts(
        self,
        count: int,
        make: Callable[[int, int], Sequence[NewJob]],
        *,
        now: datetime,
        max_payload_bytes: int,
    ) -> list[EnqueuedJob]:
        """What ``enqueue`` does with ``count`` jobs, made by ``make(start, stop)`` for the jobs numbered
        ``start`` to ``stop - 1`` (every one of them made once, in order). A store may ask for them in parts
        and write each part while the next is made; whatever ``make`` raises, and any job that breaks a
        bound, still leaves nothing written (the store rolls back what it wrote)."""
        ...

    # -- the Pump's cycle ---------------------------------------------------------------------------

    def claim(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        max_jobs: int,
        lease_duration: timedelta,
        now: datetime,
    ) -> list[ClaimedJob]:
        """Lease up to ``max_jobs`` due jobs, trying ``queues`` in order; each claim starts an Attempt.
        Paused queues yield nothing; a limited queue yields at most its free slots."""
        ...

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail] | None = None,
    ) -> ReportResult:
        """Apply fenced outcomes (``details``: tracebacks, exception classes and return values by job id; a
        return value is kept only with a success). A row the database refuses (its text, say) never costs the
        other rows their outcome: it is written alone with a generic cause."""
        ...

    def heartbeat(
        self, *, worker_id: str, job_ids: Sequence[int], lease_duration: timedelta, now: datetime
    ) -> list[HeartbeatResult]:
        """Renew live leases this worker holds; say which were lost and which jobs should stop."""
        ...

    def expire_leases(
        self, *, queues: Sequence[str], max_jobs: int, retry: RetryPolicy, now: datetime
    ) -> int:
        """End lapsed Attempts in ``queues`` (oldest first, at most ``max_jobs``), each exactly once."""
        ...

    def is_transient_fault(self, exc: BaseException) -> bool:
        """Whether a fault this store raised may be cured by retrying later (degrade, not halt)."""
        ...

    def reconnect(self) -> None:
        """After a transient fault: drop the calling thread's connection, so the next call opens a new one."""
        ...

    def cut_off_sessions(self, sessions: Sequence[object]) -> None:
        """Cut off the database sessions (Django connection wrappers) of a handler that was given up on,
        before its lease is: a transaction they hold is rolled back or interrupted, so nothing more is
        committed. A store that shares no sessions with handlers does nothing."""
        ...

    # -- operator actions (each audited with its actor, in the same transaction) ----------------------

    def cancel(self, job_id: int, *, actor: str, now: datetime) -> CancelResult: ...

    def requeue(self, job_id: int, *, actor: str, now: datetime) -> RequeueResult: ...

    def pause_queue(self, queue: str, *, actor: str, now: datetime) -> None: ...

    def resume_queue(self, queue: str, *, actor: str, now: datetime) -> None: ...

    def set_concurrency_limit(self, queue: str, limit: int | None, *, actor: str, now: datetime) -> None: ...

    # -- schedules ----------------------------------------------------------------------------------

    def sync_schedules(self, definitions: Sequence[ScheduleDefinition], *, now: datetime) -> SyncResult:
        """Make the stored schedules match ``definitions``: add new ones (their cursor at ``now``: no
        backfill), update changed ones (keeping their cursor), mark missing ones removed (they stop minting,
        and say so), restore one that comes back. Idempotent; every worker calls it when it starts."""
        ...

    def load_schedules(self, queues: Sequence[str]) -> list[ScheduleState]:
        """The schedules (not removed) of ``queues``, for the mint planner: where each cursor stands and
        whether its previous run is still live."""
        ...

    def mint(self, decisions: Sequence[MintDecision], *, now: datetime) -> int:
        """Carry out each decision in its own transaction, only if its schedule's cursor still stands at
        ``expected_cursor`` (compare-and-set): move the cursor, count and record the skipped ticks, insert one
        job per tick (a tick already minted is left as it is). Under the schedule's lock, a ``no_overlap``
        schedule with a run live by then mints what ``core.schedules.confirmed`` keeps: nothing, its ticks
        counted as skipped. Returns the jobs inserted."""
        ...

    def list_schedules(self) -> list[ScheduleView]: ...

    def pause_schedule(self, name: str, *, actor: str, now: datetime) -> bool:
        """Stop minting (its ticks are skipped while paused). False: no such schedule. Audited."""
        ...

    def resume_schedule(self, name: str, *, actor: str, now: datetime) -> bool: ...

    def trigger_schedule(self, name: str, *, actor: str, now: datetime) -> TriggerResult:
        """Mint one run now, outside the cadence (the cursor does not move), even while a run is live under
        ``no_overlap``: an operator's override. Audited. Holds the schedule's lock while it inserts (as a
        requeue of one of its runs does), so a mint in flight sees the run as live."""
        ...

    # -- retention -----------------------------------------------------------------------------------

    def purge(self, rules: Sequence[PurgeRule], *, max_jobs: int, dry_run: bool = False) -> int:
        """Delete at most ``max_jobs`` finished jobs by ``rules`` (oldest first), with their outcomes and
        audit records. ``dry_run``: only count them. A rule naming a state that is not terminal is refused
        (:class:`StoreError`), so a live job is never deleted. A job the database refuses to delete (a
        reference the store cannot see) is left, logged and passed over by this store's later purges, and the
        batch is filled from the jobs behind it: one such job never holds back the others."""
        ...

    def oldest_finished(self, queues: Sequence[str] | None = None) -> dict[State, datetime]:
        """When the oldest job in each terminal state finished (what retention will purge next)."""
        ...

    # -- pump health --------------------------------------------------------------------------------

    def record_pump(
        self,
        *,
        worker_id: str,
        group: str,
        queues: Sequence[str],
        health: Health,
        detail: str,
        started_at: datetime,
        now: datetime,
    ) -> None:
        """Upsert what a Pump says about itself (``backwave_health`` and the admin read it)."""
        ...

    def forget_pumps(self, *, silent_since: datetime) -> int:
        """Delete the status of pumps that have not recorded one since ``silent_since``."""
        ...

    def forget_pump(self, worker_id: str) -> bool:
        """Delete the status of one pump (an added Pump that let go, ``core.elastic``); whether it had one."""
        ...

    # -- reads --------------------------------------------------------------------------------------

    def next_due(self, queues: Sequence[str], *, now: datetime) -> datetime | None:
        """The earliest due time of scheduled work in non-paused ``queues``; ``now`` if some is due."""
        ...

    def next_lease_expiry(self, queues: Sequence[str]) -> datetime | None:
        """When the first lease in ``queues`` lapses, or None."""
        ...

    def upcoming(self, queues: Sequence[str], *, after: datetime) -> datetime | None:
        """The first moment strictly after ``after`` when something in ``queues`` changes by itself: a
        scheduled job comes due or a lease lapses (the test pump's virtual clock stops there), or None."""
        ...

    def get_job(self, job_id: int) -> JobView | None: ...

    def get_lease(self, job_id: int) -> LeaseView | None: ...

    def list_edges(self, job_id: int) -> list[EdgeView]:
        """The job's dependency edges: to its parents (``child_id == job_id``) and to its children, by
        (parent, child) id."""
        ...

    def list_outcomes(self, job_id: int) -> list[OutcomeView]:
        """The job's outcomes, one per ended Attempt, oldest first."""
        ...

    def list_audit(self, target: str | None = None) -> list[AuditView]:
        """Operator actions (on ``target``: a job id or queue name), oldest first."""
        ...

    def list_queues(self) -> list[QueueView]:
        """The queues that have settings (paused or limited, now or before)."""
        ...

    def list_pumps(self) -> list[PumpView]: ...

    def list_tags(self, job_id: int) -> list[str]:
        """The job's tags in their stored form, sorted; [] for a job without tags or an unknown one."""
        ...
