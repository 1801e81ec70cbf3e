"""The in-memory store: the Storage Contract in plain Python, for tests and the simulator.

It passes the same conformance suite as the database stores (``tests/contract``) and makes the same moves,
because it asks ``core.transitions`` (through ``store.changes``) exactly as they do. Every operation runs
under one lock and checks everything before it changes anything, so it is atomic and thread-safe. It imports
no Django, no database driver and no clock.

It has no transactions to join: ``supports_transactional_enqueue`` is False. ``faults``, when given, is called
as ``faults(operation, "before")`` before an operation changes anything and ``faults(operation, "after")``
once it has: raising :class:`TransientFault` there models a database that failed before the commit, or
committed and then lost the reply. ``hints``, when given, is called with the queues of jobs that an enqueue
made due at once. ``observe``, when given, is called with a :class:`JobChange` for every change the store
makes to a job (created, claimed, its Attempt ended, cancelled, requeued), under the lock and in the order
they happen: the simulator checks its invariants there, on exactly what each step touched.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..core import transitions
from ..core.health import Health
from ..core.names import queue_name_problem
from ..core.records import AuditAction, ClaimedJob, HeartbeatResult, OutcomeReport
from ..core.retry import RetryPolicy
from ..core.states import State
from ..core.text import clean
from ..core.values import replace
from . import announced, changes
from .announced import Announce
from .bounds import check_concurrency_limit, check_new_jobs
from .changes import Change
from .contract import (
    MAX_HEALTH_DETAIL_BYTES,
    AuditView,
    CancelResult,
    EnqueuedJob,
    JobView,
    LeaseView,
    MakesEveryJobFirst,
    NewJob,
    OutcomeDetail,
    OutcomeView,
    PumpView,
    QueueView,
    ReportResult,
    RequeueResult,
    ScheduleView,
    StoreError,
)
from .memory_edges import MemoryDependencyMixin
from .memory_scheduling import MemorySchedulingMixin
from .order import inserts_order

logger = logging.getLogger("backwave.store")


class TransientFault(ConnectionError):
    """A fault injected into the memory store that a later retry cures (what a lost connection is)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobChange:
    """One change to one job, as the store made it: what ``observe`` is given.

    ``operation`` is the store method (enqueue, claim, report, expire, cancel, requeue, mint, trigger,
    purge), or ``resolve`` for a child whose parent's end resolved one of its edges (in the same call);
    ``before`` is None when the job was created, ``after`` None when it was purged. The leases are
    the job's before and after the change, and ``outcome`` the Outcome recorded with it (when an Attempt
    ended).
    """

    operation: str
    now: datetime
    before: JobView | None
    after: JobView | None
    lease_before: LeaseView | None = None
    lease_after: LeaseView | None = None
    outcome: OutcomeView | None = None
    tags: tuple[str, ...] = ()  #: the tags the change gave the job (new ones only)


def _transition(
    operation: str,
    before: JobView | None,
    after: JobView,
    lease: LeaseView | None,
    outcome: OutcomeView | None,
    cause: str,
) -> announced.Transition:
    """One change as ``announced.Transition`` says it: the Attempt and the cause the database stores give."""
    if outcome is not None:
        attempt, cause = outcome.attempt, outcome.message
    elif lease is not None and operation == "claim":
        attempt, cause = after.attempt, f"claimed by {lease.owner}"
    else:
        attempt, cause = after.attempt, cause or (after.terminal_cause if after.state.is_terminal else "")
    return announced.Transition(
        job_id=after.id, wire_name=after.wire_name, queue=after.queue,
        from_state=None if before is None else before.state, to_state=after.state, attempt=attempt,
        cause=cause, operation=operation,
    )  # fmt: skip


class _AnnouncingLock:
    """The store's one re-entrant lock, which sends the transitions an operation kept (``pending``) to the
    store's ``announce`` once the outermost holder lets go: after the change is whole, outside the lock, so a
    receiver may call the store."""

    def __init__(self, store: MemoryStore) -> None:
        self._lock = threading.RLock()
        self._store = store
        self._depth = 0
        self.pending: list[announced.Transition] = []

    def __enter__(self) -> None:
        self._lock.acquire()
        self._depth += 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        batch: list[announced.Transition] = []
        if self._depth == 0 and self.pending:
            batch, self.pending = self.pending, []
        self._lock.release()
        announce = self._store.announce
        if batch and announce is not None:
            try:
                announce(batch)
            except Exception:  # an announcer is never able to undo or break the change it announces
                logger.exception("announcing %d job transition(s) failed; the changes stand", len(batch))


class MemoryStore(MemorySchedulingMixin, MemoryDependencyMixin, MakesEveryJobFirst):
    """The Storage Contract in memory."""

    supports_transactional_enqueue = False
    one_writer_at_a_time = False

    def __init__(
        self,
        *,
        name: str = "memory",
        faults: Callable[[str, str], None] | None = None,
        hints: Callable[[Sequence[str]], None] | None = None,
        observe: Callable[[JobChange], None] | None = None,
        announce: Announce | None = None,
    ) -> None:
        self.using = name
        self.faults = faults
        self.hints = hints
        self.observe = observe
        self.announce = announce
        self._lock = _AnnouncingLock(self)
        self._jobs: dict[int, JobView] = {}
        self._leases: dict[int, LeaseView] = {}
        self._outcomes: dict[int, list[OutcomeView]] = {}
        self._tags: dict[int, set[str]] = {}  # the tags of each job that has some
        self._audit: list[AuditView] = []
        self._queues: dict[str, QueueView] = {}
        self._pumps: dict[str, PumpView] = {}
        self._schedules: dict[str, ScheduleView] = {}
        self._live_runs: Counter[str] = Counter()  # live (not terminal) jobs per schedule that minted them
        self._ticks: set[tuple[str, datetime]] = set()  # (schedule, tick) of every minted job stored
        # Scheduled jobs per queue and priority as sorted (due_at, id): claims and due times read the fronts,
        # never scan.
        self._waiting: dict[str, dict[int, list[tuple[datetime, int]]]] = {}
        self._keys: dict[
            tuple[str, str], int
        ] = {}  # (wire name, unique key) -> the unfinished job holding it
        self._next_id = 1
        self._init_edges()

    def _put(self, job: JobView) -> None:
        """Store a job (new or changed), keeping the indexes in step."""
        old = self._jobs.get(job.id)
        if old is not None and old.state is State.SCHEDULED:
            self._unwait(old)
        if job.state is State.SCHEDULED:
            by_priority = self._waiting.setdefault(job.queue, {})
            bisect.insort(by_priority.setdefault(job.priority, []), (job.due_at, job.id))
        self._jobs[job.id] = job
        self._hold_key(old, job)
        if old is not None and old.schedule is not None and not old.state.is_terminal:
            self._live_runs[old.schedule] -= 1
        if job.schedule is not None and not job.state.is_terminal:
            self._live_runs[job.schedule] += 1
        if job.schedule is not None and job.scheduled_for is not None:
            self._ticks.add((job.schedule, job.scheduled_for))

    def _unwait(self, job: JobView) -> None:
        by_priority = self._waiting[job.queue]
        waiting = by_priority[job.priority]
        del waiting[bisect.bisect_left(waiting, (job.due_at, job.id))]
        if not waiting:
            del by_priority[job.priority]

    def _hold_key(self, old: JobView | None, job: JobView | None) -> None:
        """Keep the unique-key index in step: an unfinished job holds its key, a finished one frees it."""
        if (old is None or old.unique_key is None) and (job is None or job.unique_key is None):
            return  # most jobs have no key
        for view, holds in ((old, False), (job, True)):
            if view is None or view.unique_key is None:
                continue
            key = (view.wire_name, view.unique_key)
            if holds and not view.state.is_terminal:
                self._keys[key] = view.id
            elif self._keys.get(key) == view.id:
                del self._keys[key]

    def _due(self, queue: str, now: datetime, take: int) -> list[int]:
        """Up to ``take`` scheduled jobs of ``queue`` due at ``now``, in claim order (priority, due, id)."""
        found: list[int] = []
        for priority in sorted(self._waiting.get(queue, {}), reverse=True):
            waiting = self._waiting[queue][priority]
            found += [job_id for _, job_id in waiting[: bisect.bisect_right(waiting, (now, 1 << 63))]]
            if len(found) >= take:
                break
        return found[:take]

    def _first_due(self, queue: str, after: datetime | None = None) -> datetime | None:
        """The earliest due time of ``queue``'s scheduled jobs (strictly after ``after``, when given)."""
        times = []
        for waiting in self._waiting.get(queue, {}).values():
            first = 0 if after is None else bisect.bisect_right(waiting, (after, 1 << 63))
            if first < len(waiting):
                times.append(waiting[first][0])
        return min(times, default=None)

    def _drop(self, job_id: int) -> None:
        job = self._jobs.pop(job_id)
        if job.state is State.SCHEDULED:
            self._unwait(job)
        self._hold_key(job, None)
        if job.schedule is not None and not job.state.is_terminal:
            self._live_runs[job.schedule] -= 1
        self._outcomes.pop(job_id, None)
        self._tags.pop(job_id, None)
        self._drop_edges(job_id)
        if job.schedule is not None and job.scheduled_for is not None:
            self._ticks.discard((job.schedule, job.scheduled_for))

    def _fault(self, operation: str, when: str) -> None:
        if self.faults is not None:
            self.faults(operation, when)

    def _observed(
        self,
        operation: str,
        now: datetime,
        before: JobView | None,
        after: JobView | None,
        lease_before: LeaseView | None = None,
        lease_after: LeaseView | None = None,
        outcome: OutcomeView | None = None,
        cause: str = "",
        tags: tuple[str, ...] = (),
    ) -> None:
        """Hand ``observe`` one change to one job, when there is an observer; keep its transition for
        ``announce``, when there is one (sent once the operation lets go of the lock)."""
        if (
            self.announce is not None
            and after is not None
            and self.announce.listening()
            and (before is None or before.state != after.state)
        ):
            self._lock.pending.append(_transition(operation, before, after, lease_after, outcome, cause))
        if self.observe is not None:
            change = JobChange(
                operation=operation, now=now, before=before, after=after, lease_before=lease_before,
                lease_after=lease_after, outcome=outcome, tags=tags,
            )  # fmt: skip
            self.observe(change)

    def is_transient_fault(self, exc: BaseException) -> bool:
        return isinstance(exc, TransientFault)

    def reconnect(self) -> None:
        """No connection to drop."""

    def cut_off_sessions(self, sessions: Sequence[object]) -> None:
        """Handlers share no sessions with this store."""

    # -- jobs in ------------------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[EnqueuedJob]:
        check_new_jobs(jobs, max_payload_bytes)
        with self._lock:
            self._fault("enqueue", "before")
            parents = self._parent_states(jobs)  # an unknown parent refuses the batch before any write
            done: dict[int, EnqueuedJob] = {}
            due = set()
            for position in inserts_order(jobs):  # the database stores' order: plain jobs, then by key
                new = jobs[position]
                holder = self._keys.get((new.wire_name, new.unique_key)) if new.unique_key else None
                if holder is not None:
                    done[position] = EnqueuedJob(id=holder, duplicate=True)
                    continue
                job_id, self._next_id = self._next_id, self._next_id + 1
                view = JobView(
                    id=job_id, wire_name=new.wire_name, queue=new.queue, payload=new.payload,
                    state=State.SCHEDULED, attempt=0, max_attempts=new.max_attempts, due_at=new.due_at,
                    created_at=now, terminal_at=None, terminal_cause="", cancel_requested=False,
                    timeout=new.timeout, priority=new.priority, unique_key=new.unique_key,
                    trace_context=new.trace_context,
                )  # fmt: skip
                if new.parents:
                    view = self._born(view, new, parents, now)
                self._put(view)
                done[position] = EnqueuedJob(
                    id=job_id, state=view.state, parents_remaining=view.parents_remaining,
                    terminal_cause=view.terminal_cause,
                )  # fmt: skip
                if new.tags:
                    self._tags[job_id] = set(new.tags)
                if new.due_at <= now and view.state is State.SCHEDULED:
                    due.add(new.queue)
                self._observed("enqueue", now, None, self._jobs[job_id], tags=new.tags)
            self._fault("enqueue", "after")
        if due and self.hints is not None:
            self.hints(sorted(due))
        return [done[position] for position in range(len(jobs))]

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
        if max_jobs <= 0 or not queues:
            return []
        with self._lock:
            self._fault("claim", "before")
            claimed: list[ClaimedJob] = []
            for queue in queues:
                take = min(max_jobs - len(claimed), self._free_slots(queue))
                if take <= 0:
                    continue
                for job_id in self._due(queue, now, take):
                    claimed.append(self._lease(self._jobs[job_id], worker_id, now, lease_duration))
            self._fault("claim", "after")
        return claimed

    def _limit(self, queue: str) -> int | None:
        settings = self._queues.get(queue)
        return None if settings is None else settings.concurrency_limit

    def _free_slots(self, queue: str) -> int:
        settings = self._queues.get(queue)
        if settings is not None and settings.paused:
            return 0
        if settings is None or settings.concurrency_limit is None:
            return 1 << 62
        leased = sum(1 for lease in self._leases.values() if lease.queue == queue)
        return max(0, settings.concurrency_limit - leased)

    def _lease(self, job: JobView, worker_id: str, now: datetime, duration: timedelta) -> ClaimedJob:
        changes.check_claim(job.state)
        before, job = job, replace(job, state=State.LEASED, attempt=job.attempt + 1)
        self._put(job)
        lease = self._leases[job.id] = LeaseView(
            job_id=job.id, queue=job.queue, owner=worker_id, attempt=job.attempt, claimed_at=now,
            expires_at=now + duration,
        )  # fmt: skip
        self._observed("claim", now, before, job, lease_after=lease)
        return ClaimedJob(
            id=job.id, wire_name=job.wire_name, queue=job.queue, payload=job.payload, attempt=job.attempt,
            max_attempts=job.max_attempts, due_at=job.due_at, timeout=job.timeout,
            scheduled_for=job.scheduled_for, created_at=job.created_at, trace_context=job.trace_context,
        )  # fmt: skip

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail] | None = None,
    ) -> ReportResult:
        if not reports:
            return ReportResult(applied=frozenset(), stale=frozenset(), opened=False)
        details = details or {}
        with self._lock:
            self._fault("report", "before")
            moves = []
            for report in changes.first_per_attempt(reports).values():
                if not self._holds(self._leases.get(report.job_id), worker_id, report.attempt, now):
                    continue
                flagged = self._jobs[report.job_id].cancel_requested
                change = changes.for_report(
                    report,
                    worker=worker_id,
                    cancel_requested=flagged,
                    retry=retry,
                    now=now,
                    detail=details.get(report.job_id),
                )
                moves.append(change)
            opened = (
                changes.opens(moves, now)
                or any(self._children.get(c.job_id) for c in moves if c.move.is_terminal)
                or any(self._limit(self._jobs[c.job_id].queue) is not None for c in moves)
            )
            self._apply(moves, now, "report")
            self._fault("report", "after")
        applied = {c.job_id for c in moves}
        return ReportResult(
            applied=frozenset(applied), stale=frozenset({r.job_id for r in reports} - applied), opened=opened
        )

    @staticmethod
    def _holds(lease: LeaseView | None, worker_id: str, attempt: int, now: datetime) -> bool:
        """The fence (contract rule 3): ``worker_id`` holds Attempt ``attempt`` and its lease is live."""
        return (
            lease is not None
            and lease.owner == worker_id
            and lease.attempt == attempt
            and lease.expires_at > now
        )

    def _apply(self, moves: Sequence[Change], now: datetime, operation: str) -> None:
        for change in moves:
            if self._jobs[change.job_id].state is not State.LEASED:
                raise StoreError(f"leased job {change.job_id} lost its state under a held lease")
        for change in moves:
            before = job = self._jobs[change.job_id]
            move = change.move
            lease = self._leases.pop(change.job_id, None)
            attempt = job.attempt + move.attempt_delta
            if move.is_terminal:
                job = replace(
                    job, state=move.state, attempt=attempt, terminal_at=now, terminal_cause=change.message,
                    cancel_requested=False, output=change.output,
                )  # fmt: skip
            elif move.due_at is not None:
                job = replace(job, state=move.state, attempt=attempt, due_at=move.due_at)
            else:
                job = replace(job, state=move.state, attempt=attempt)
            self._put(job)
            outcome = OutcomeView(
                job_id=job.id,
                attempt=change.attempt,
                worker=change.worker,
                kind=change.kind,
                state_after=move.state,
                message=change.message,
                detail=change.detail,
                recorded_at=now,
                error_type=change.error_type,
                started_at=lease.claimed_at if lease is not None else change.started_at,
            )
            self._outcomes.setdefault(job.id, []).append(outcome)
            held = self._tags.setdefault(job.id, set()) if change.tags else set()
            added = tuple(tag for tag in change.tags if tag not in held)
            held.update(added)
            self._observed(operation, now, before, job, lease_before=lease, outcome=outcome, tags=added)
        ended = {c.job_id: c.state for c in moves if c.move.is_terminal and self._children.get(c.job_id)}
        if ended:
            self._resolve_children(ended, now)

    def heartbeat(
        self, *, worker_id: str, job_ids: Sequence[int], lease_duration: timedelta, now: datetime
    ) -> list[HeartbeatResult]:
        if not job_ids:
            return []
        with self._lock:
            self._fault("heartbeat", "before")
            results = []
            for job_id in job_ids:
                lease = self._leases.get(job_id)
                renewed = lease is not None and lease.owner == worker_id and lease.expires_at > now
                if renewed and lease is not None:
                    self._leases[job_id] = replace(lease, expires_at=now + lease_duration)
                flag = renewed and self._jobs[job_id].cancel_requested
                results.append(HeartbeatResult(job_id=job_id, renewed=renewed, cancel_requested=flag))
            self._fault("heartbeat", "after")
        return results

    def expire_leases(
        self, *, queues: Sequence[str], max_jobs: int, retry: RetryPolicy, now: datetime
    ) -> int:
        if not queues or max_jobs <= 0:
            return 0
        with self._lock:
            self._fault("expire", "before")
            lapsed = sorted(
                (
                    lease
                    for lease in self._leases.values()
                    if lease.queue in queues and lease.expires_at <= now
                ),
                key=lambda lease: (lease.expires_at, lease.job_id),
            )[:max_jobs]
            moves = [
                changes.for_expiry(
                    job_id=lease.job_id,
                    attempt=lease.attempt,
                    owner=lease.owner,
                    max_attempts=self._jobs[lease.job_id].max_attempts,
                    cancel_requested=self._jobs[lease.job_id].cancel_requested,
                    retry=retry,
                    now=now,
                )
                for lease in lapsed
            ]
            self._apply(moves, now, "expire")
            self._fault("expire", "after")
        return len(moves)

    # -- operator actions ---------------------------------------------------------------------------

    def _record(self, actor: str, action: str, target: object, now: datetime, detail: str = "") -> None:
        self._audit.append(
            AuditView(
                actor=clean(actor, 255), action=action, target=str(target), detail=detail, recorded_at=now
            )
        )

    def cancel(self, job_id: int, *, actor: str, now: datetime) -> CancelResult:
        with self._lock:
            self._fault("cancel", "before")
            job = self._jobs.get(job_id)
            effect = changes.cancel_effect(job.state) if job else transitions.CancelEffect.REFUSE
            if job is None or effect is transitions.CancelEffect.REFUSE:
                return CancelResult.NOT_CANCELLABLE
            if effect is transitions.CancelEffect.REQUEST:
                after = replace(job, cancel_requested=True)
                result = CancelResult.REQUESTED
            else:
                cause = clean(transitions.cancel_cause(actor))
                after = replace(job, state=State.CANCELLED, terminal_at=now, terminal_cause=cause)
                result = CancelResult.CANCELLED
            self._put(after)
            lease = self._leases.get(job_id)
            self._observed("cancel", now, job, after, lease_before=lease, lease_after=lease)
            if after.state is State.CANCELLED and self._children.get(job_id):
                self._resolve_children({job_id: State.CANCELLED}, now)
            self._record(actor, AuditAction.CANCEL, job_id, now, detail=result.value)
            self._fault("cancel", "after")
        return result

    def requeue(self, job_id: int, *, actor: str, now: datetime) -> RequeueResult:
        with self._lock:
            self._fault("requeue", "before")
            job = self._jobs.get(job_id)
            if job is None or not changes.can_requeue(job.state):
                return RequeueResult.NOT_REQUEUEABLE
            if job.unique_key is not None and (job.wire_name, job.unique_key) in self._keys:
                return RequeueResult.KEY_TAKEN
            after = replace(
                job, state=State.SCHEDULED, attempt=0, due_at=now, terminal_at=None, terminal_cause="",
                cancel_requested=False, output=None,
            )  # fmt: skip
            self._put(after)
            self._observed("requeue", now, job, after, cause=clean(announced.requeue_cause(actor)))
            self._record(actor, AuditAction.REQUEUE, job_id, now)
            self._fault("requeue", "after")
        return RequeueResult.REQUEUED

    def _change_queue(self, queue: str, actor: str, now: datetime, action: str, **values: Any) -> None:
        problem = queue_name_problem(queue)
        if problem:
            raise StoreError(problem)
        with self._lock:
            self._fault(action, "before")
            current = self._queues.get(queue, QueueView(queue=queue, paused=False, concurrency_limit=None))
            self._queues[queue] = replace(current, **values)
            self._record(actor, action, queue, now, detail=", ".join(f"{k}={v}" for k, v in values.items()))
            self._fault(action, "after")

    def pause_queue(self, queue: str, *, actor: str, now: datetime) -> None:
        self._change_queue(queue, actor, now, AuditAction.PAUSE_QUEUE, paused=True)

    def resume_queue(self, queue: str, *, actor: str, now: datetime) -> None:
        self._change_queue(queue, actor, now, AuditAction.RESUME_QUEUE, paused=False)

    def set_concurrency_limit(self, queue: str, limit: int | None, *, actor: str, now: datetime) -> None:
        check_concurrency_limit(limit)
        self._change_queue(queue, actor, now, AuditAction.SET_CONCURRENCY_LIMIT, concurrency_limit=limit)

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
        host, pid = worker_id.split(":")[0], int(worker_id.split(":")[1])
        with self._lock:
            self._fault("record_pump", "before")
            self._pumps[worker_id] = PumpView(
                worker_id=worker_id, group=group, host=host, pid=pid, queues=tuple(queues), health=health,
                detail=clean(detail, MAX_HEALTH_DETAIL_BYTES), started_at=started_at, last_beat_at=now,
            )  # fmt: skip
            self._fault("record_pump", "after")

    def forget_pumps(self, *, silent_since: datetime) -> int:
        with self._lock:
            silent = [w for w, p in self._pumps.items() if p.last_beat_at < silent_since]
            for worker_id in silent:
                del self._pumps[worker_id]
        return len(silent)

    def forget_pump(self, worker_id: str) -> bool:
        with self._lock:
            return self._pumps.pop(worker_id, None) is not None

    # -- reads --------------------------------------------------------------------------------------

    def next_due(self, queues: Sequence[str], *, now: datetime) -> datetime | None:
        with self._lock:
            paused = {q for q, s in self._queues.items() if s.paused}
            times = [t for q in queues if q not in paused and (t := self._first_due(q)) is not None]
        return max(min(times), now) if times else None

    def next_lease_expiry(self, queues: Sequence[str]) -> datetime | None:
        with self._lock:
            times = [lease.expires_at for lease in self._leases.values() if lease.queue in queues]
        return min(times) if times else None

    def upcoming(self, queues: Sequence[str], *, after: datetime) -> datetime | None:
        with self._lock:
            times = []
            for queue in set(queues):
                first = self._first_due(queue, after)
                if first is not None:
                    times.append(first)
            times += [lease.expires_at for lease in self._leases.values() if lease.queue in queues]
        present = [t for t in times if t > after]
        return min(present) if present else None

    def get_job(self, job_id: int) -> JobView | None:
        with self._lock:
            return self._jobs.get(job_id)

    def get_lease(self, job_id: int) -> LeaseView | None:
        with self._lock:
            return self._leases.get(job_id)

    def list_outcomes(self, job_id: int) -> list[OutcomeView]:
        with self._lock:
            return list(self._outcomes.get(job_id, []))

    def list_audit(self, target: str | None = None) -> list[AuditView]:
        with self._lock:
            return [a for a in self._audit if target is None or a.target == target]

    def list_queues(self) -> list[QueueView]:
        with self._lock:
            return [self._queues[q] for q in sorted(self._queues)]

    def list_tags(self, job_id: int) -> list[str]:
        with self._lock:
            return sorted(self._tags.get(job_id, ()))

    def list_pumps(self) -> list[PumpView]:
        with self._lock:
            return sorted(self._pumps.values(), key=lambda p: (p.group, p.worker_id))

    # -- for tests and the simulator ----------------------------------------------------------------

    def all_jobs(self) -> list[JobView]:
        with self._lock:
            return [self._jobs[i] for i in sorted(self._jobs)]

    def all_tags(self) -> dict[int, frozenset[str]]:
        """The tags of every job that has some."""
        with self._lock:
            return {job_id: frozenset(tags) for job_id, tags in self._tags.items() if tags}

    def all_leases(self) -> list[LeaseView]:
        with self._lock:
            return [self._leases[i] for i in sorted(self._leases)]
