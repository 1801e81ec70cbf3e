"""The portable Django store: the Storage Contract through the ORM, on any database Django supports with
row locks (PostgreSQL has its own subclass with SQL hot paths: ``store/postgres.py``).

Claims pick rows with ``select_for_update(skip_locked=True)`` where the database has it, so Pumps claim
disjoint rows with no coordination. On SQLite, which has no row locks, every write transaction begins
IMMEDIATE, taking the database's write lock up front, so claims serialize across threads and processes and
wait (busy timeout) instead of failing.

Every decision about where a job goes next comes from ``core.transitions`` (through ``store.changes``); this
module only reads the facts the decision needs and writes the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, IntegrityError, connections, transaction
from django.db.models import F

from .. import signals, wakeups
from ..core import transitions
from ..core.dependencies import RunOn
from ..core.health import Health
from ..core.names import queue_name_problem
from ..core.records import ClaimedJob, HeartbeatResult, OutcomeKind, OutcomeReport
from ..core.retry import RetryPolicy
from ..core.states import State
from ..core.text import clean
from ..models import AuditRecord, Job, JobTag, Lease, Outcome, PumpStatus, QueueSettings
from . import announced, changes, faults, inserts, sqlite
from .bounds import check_concurrency_limit, check_new_jobs
from .changes import CLAIMED_FIELDS, Change
from .contract import (
    MAX_CONCURRENCY_LIMIT,
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
    StoreError,
)
from .deadlocks import restarted_on_deadlock
from .edges import DependencyMixin
from .retention import RetentionMixin
from .scheduling import SchedulingMixin

_JOB_FIELDS = (
    "id", "wire_name", "queue", "payload", "state", "attempt", "max_attempts", "due_at", "created_at",
    "terminal_at", "terminal_cause", "cancel_requested", "timeout", "schedule", "scheduled_for", "priority",
    "unique_key", "trace_context", "run_on", "parents_remaining",
)  # fmt: skip


class DjangoStore(SchedulingMixin, RetentionMixin, DependencyMixin, MakesEveryJobFirst):
    """The Storage Contract over one Django database alias."""

    supports_transactional_enqueue = True
    one_writer_at_a_time = False

    def __init__(self, using: str = "default") -> None:
        self.using = using
        self._refused = {}  # finished jobs the database refused to purge: passed over from then on
        self._limited: frozenset[str] = frozenset()  # queues with a concurrency limit, as the claims read

    @property
    def connection(self) -> Any:
        return connections[self.using]

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction. On SQLite it begins IMMEDIATE unless the caller's transaction is open."""
        conn = self.connection
        if conn.vendor != "sqlite" or conn.in_atomic_block:
            with transaction.atomic(using=self.using):
                yield
            return
        conn.ensure_connection()
        mode, conn.transaction_mode = conn.transaction_mode, "IMMEDIATE"
        try:
            atomic = transaction.atomic(using=self.using)
            atomic.__enter__()
        finally:
            conn.transaction_mode = mode
        try:
            yield
        except BaseException as exc:
            atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise
        atomic.__exit__(None, None, None)

    def is_transient_fault(self, exc: BaseException) -> bool:
        return faults.is_transient(exc)

    def reconnect(self) -> None:
        self.connection.close()

    def cut_off_sessions(self, sessions: Sequence[object]) -> None:
        """SQLite: roll back the transaction each session holds and make it refuse every later statement, from
        the Pump's thread (``store/sqlite.py``), which gives the database's write lock back at once. Sessions
        of other databases are left to their stores' own means."""
        for session in sessions:
            sqlite.cut_off(session)

    # -- hooks for a database's own mechanisms (PostgreSQL: advisory locks and NOTIFY) ---------------------

    def _lock_queues_for_claim(self, queues: Sequence[str]) -> None:
        """Before a claim reads queue settings: wait for operator changes in flight on these queues."""

    def _lock_queue_for_change(self, queue: str) -> None:
        """Before an operator changes a queue's settings: wait for claims in flight on it."""

    def _hint_other_processes(self, queues: Sequence[str]) -> None:
        """Inside an enqueue's transaction: wake Pumps of other processes when it commits."""

    def _among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``, as SQL and its parameters: a placeholder per value."""
        return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)

    def _check_constraints_at_once(self) -> None:
        """In a purge's own transaction, before it deletes: have the database check deferred foreign keys at
        each statement, so a refused row fails its own savepoint rather than the whole batch at commit."""

    def _insert_batch_size(self, largest_text: int) -> int | None:
        """Rows per INSERT for rows whose text columns hold at most ``largest_text`` characters, where the
        database bounds a statement's size (MariaDB's max_allowed_packet); None: Django's own batches."""
        return None

    # -- enqueue -----------------------------------------------------------------------------------

    @restarted_on_deadlock
    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[EnqueuedJob]:
        check_new_jobs(jobs, max_payload_bytes)
        if not jobs:
            return []
        with self._write():
            parents = self._lock_parents(jobs)  # ascending id, before anything is written
            done = inserts.insert_all(self, jobs, now, self._insert_keyed)
            if parents:
                done = self._write_edges(jobs, done, parents, now)
            self._announce(lambda: announced.births(jobs, done))
            written = (new for new, result in zip(jobs, done, strict=True) if not result.duplicate)
            due_queues = sorted({new.queue for new in written if new.due_at <= now})
            if due_queues:
                self._hint_other_processes(due_queues)
                self._hint_this_process(due_queues)
        return done

    def _insert_keyed(self, new: NewJob, now: datetime) -> int | None:
        """Insert one job with a unique key; None when an unfinished job holds the key."""
        return inserts.insert_keyed_in_savepoint(self, new, now)

    def _hint_this_process(self, queues: Sequence[str]) -> None:
        transaction.on_commit(lambda: wakeups.publish(queues), using=self.using)

    # -- job_transitioned ----------------------------------------------------------------------------

    def _announce(self, build: Callable[[], list[announced.Transition]]) -> None:
        """Inside a write: send what ``build`` returns to ``job_transitioned`` once the transaction commits
        (outside one: at once, it has committed). ``build`` is called only when a receiver is connected."""
        if not signals.listening():
            return
        batch = build()
        if batch:
            sender = type(self)
            transaction.on_commit(lambda: signals.announce(batch, sender), using=self.using, robust=True)

    def _names(self, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """The (wire name, queue) of these jobs."""
        rows = Job.objects.using(self.using).filter(id__in=list(ids)).values_list("id", "wire_name", "queue")
        return {job_id: (wire_name, queue) for job_id, wire_name, queue in rows}

    def _announce_endings(self, moves: Sequence[Change]) -> None:
        if moves:
            self._announce(lambda: announced.endings(moves, self._names(c.job_id for c in moves)))

    # -- claim -------------------------------------------------------------------------------------

    def _queue_settings(self, queues: Sequence[str]) -> dict[str, tuple[bool, int | None]]:
        """(paused, limit) of the queues that have settings, read after waiting for changes in flight."""
        self._lock_queues_for_claim(queues)
        found = QueueSettings.objects.using(self.using).filter(queue__in=queues)
        return {
            q: (paused, limit)
            for q, paused, limit in found.values_list("queue", "paused", "concurrency_limit")
        }

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
        claimed: list[ClaimedJob] = []
        with self._write():
            settings = self._queue_settings(queues)
            self._limits_read(queues, {q for q, (_, limit) in settings.items() if limit is not None})
            with_due = self._queues_with_due(queues, now)
            for queue in (q for q in queues if q in with_due):
                take = max_jobs - len(claimed)
                if take <= 0:
                    break
                paused, limit = settings.get(queue, (False, None))
                if paused:
                    continue
                limited = limit is not None
                if limited:  # limited claimers serialize on the settings row
                    take = min(take, self._free_slots(queue))
                if take > 0:
                    claimed += self._claim_queue(worker_id, queue, take, lease_duration, now, limited=limited)
            self._announce(lambda: announced.claims(claimed, worker_id))
        return claimed

    def _limits_read(self, queues: Sequence[str], limited: set[str]) -> None:
        """A claim read the settings of ``queues``: these of them have a concurrency limit."""
        self._limited = (self._limited - set(queues)) | limited

    def _queues_with_due(self, queues: Sequence[str], now: datetime) -> set[str]:
        """The queues among ``queues`` that hold a due job. One queue is not looked at: its claim finds out
        for itself, and the look would read the whole backlog (SELECT DISTINCT over the claimable rows was
        measured to cost more than the claim under a 20,000-job backlog)."""
        if len(queues) == 1:
            return set(queues)
        due = Job.objects.using(self.using).claimable(list(queues), now).order_by()
        return set(due.values_list("queue", flat=True).distinct())  # one query, not one per queue

    def _free_slots(self, queue: str) -> int:
        """Slots left under a queue's limit, read under its settings row lock (limited claimers serialize)."""
        config = QueueSettings.objects.using(self.using).select_for_update().get(queue=queue)
        if config.paused or config.concurrency_limit is None:
            return 0 if config.paused else MAX_CONCURRENCY_LIMIT
        leased = Lease.objects.using(self.using).filter(queue=queue).count()
        return max(0, config.concurrency_limit - leased)

    def _claim_queue(
        self,
        worker_id: str,
        queue: str,
        take: int,
        lease_duration: timedelta,
        now: datetime,
        *,
        limited: bool,
    ) -> list[ClaimedJob]:
        jobs = Job.objects.using(self.using)
        picked = jobs.claimable([queue], now).select_for_update(skip_locked=True).values_list("id", flat=True)
        ids = list(picked[:take])
        if not ids:
            return []
        state = changes.claimable_state()  # what claimable() picks from, its move to leased checked
        moved = jobs.filter(id__in=ids, state=state).update(state=State.LEASED, attempt=F("attempt") + 1)
        if moved != len(ids):  # picked rows are locked (on SQLite, the database is): only a bug gets here
            raise StoreError(f"{len(ids) - moved} of jobs {sorted(ids)} left {state} while being claimed")
        rows = list(
            jobs.filter(id__in=ids).order_by("-priority", "due_at", "id").values_list(*CLAIMED_FIELDS)
        )
        expires = now + lease_duration
        Lease.objects.using(self.using).bulk_create(
            Lease(job_id=r[0], queue=r[2], owner=worker_id, attempt=r[4], claimed_at=now, expires_at=expires)
            for r in rows
        )
        return [changes.claimed_job(r) for r in rows]

    # -- outcomes ----------------------------------------------------------------------------------

    @restarted_on_deadlock
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
        try:
            applied, opened = self._report(worker_id, reports, retry, now, details)
        except DatabaseError as exc:
            if self.is_transient_fault(exc):
                raise
            applied, opened = self._report_one_by_one(worker_id, reports, retry, now, details)
        ids = {r.job_id for r in reports}
        return ReportResult(applied=frozenset(applied), stale=frozenset(ids - applied), opened=opened)

    def _report_one_by_one(
        self,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail],
    ) -> tuple[set[int], bool]:
        """After the database refused a batch: each row alone, and a row it still refuses with a generic
        message and no traceback. Only a refusal of that too (a fault of the store, not of the row) raises."""
        applied: set[int] = set()
        opened = False
        for report in changes.first_per_attempt(reports).values():
            try:
                done, more = self._report(worker_id, [report], retry, now, details)
            except DatabaseError as exc:
                if self.is_transient_fault(exc):
                    raise
                plain = changes.with_generic_text(report, exc)
                done, more = self._report(worker_id, [plain], retry, now, {})
            applied |= done
            opened = opened or more
        return applied, opened

    def _report(
        self,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail],
    ) -> tuple[set[int], bool]:
        """One fenced batch in one transaction: the ids whose outcome applied, and whether it may have made
        work claimable at once (``ReportResult.opened``)."""
        with self._write():
            first = changes.first_per_attempt(reports)
            held = self._fence(worker_id, set(first), now)
            parents = self._lock_with_children(sorted(job_id for job_id, _ in held))
            flags = self._cancel_flags([job_id for job_id, _ in held])
            opened = self._apply_and_resolve(
                [
                    changes.for_report(
                        first[job_id, attempt],
                        worker=worker_id,
                        cancel_requested=flags.get(job_id, False),
                        retry=retry,
                        now=now,
                        detail=details.get(job_id),
                        started_at=started_at,
                    )
                    for (job_id, attempt), (started_at, _) in held.items()
                ],
                parents,
                now,
            )
        return {job_id for job_id, _ in held}, opened or self._frees_limited({q for _, q in held.values()})

    def _frees_limited(self, queues: set[str]) -> bool:
        """Whether a job of one of these queues ending frees a slot of a concurrency limit (as the settings
        this store's last claims read)."""
        return not queues.isdisjoint(self._limited)

    def _apply_and_resolve(self, moves: Sequence[Change], parents: set[int], now: datetime) -> bool:
        """Apply the moves, then resolve the edges of the jobs among ``parents`` that ended (their rows and
        their children's are locked already). Returns whether this made work claimable at once: a job due
        now, or a parent ended (``ReportResult.opened``; limited queues aside)."""
        self._apply(moves, now)
        ended = {c.job_id: c.state for c in moves if c.move.is_terminal and c.job_id in parents}
        if ended:
            self._resolve_children(ended, now)
        return bool(ended) or changes.opens(moves, now)

    def _fence(
        self, worker_id: str, attempts: set[tuple[int, int]], now: datetime
    ) -> dict[tuple[int, int], tuple[datetime, str]]:
        """Delete the leases this worker still holds, live at ``now``, for these (job, Attempt) pairs.
        Returns the pairs whose lease passed (at most one per job), with when each Attempt began and its
        queue."""
        job_ids = list({job_id for job_id, _ in attempts})
        leases = Lease.objects.using(self.using).filter(job_id__in=job_ids, owner=worker_id)
        live = leases.filter(expires_at__gt=now).select_for_update()
        held = {
            (job_id, attempt): (claimed_at, queue)
            for job_id, attempt, claimed_at, queue in live.values_list(
                "job_id", "attempt", "claimed_at", "queue"
            )
            if (job_id, attempt) in attempts
        }
        if held:
            Lease.objects.using(self.using).filter(job_id__in=[job_id for job_id, _ in held]).delete()
        return held

    def _cancel_flags(self, ids: Sequence[int]) -> dict[int, bool]:
        if not ids:
            return {}
        flagged = Job.objects.using(self.using).filter(id__in=ids, cancel_requested=True)
        return dict.fromkeys(flagged.values_list("id", flat=True), True)

    def _apply(self, moves: Sequence[Change], now: datetime) -> None:
        """Move leased jobs to their next states, grouped so each distinct change is one UPDATE."""
        groups: dict[tuple[object, ...], list[Change]] = defaultdict(list)
        for change in moves:
            groups[change.update_key].append(change)
        jobs = Job.objects.using(self.using)
        for group in groups.values():
            move, ids = group[0].move, [c.job_id for c in group]
            values: dict[str, Any] = {"state": move.state}
            if move.is_terminal:  # a finished job has nothing left to cancel
                values.update(terminal_at=now, terminal_cause=group[0].message, cancel_requested=False)
            elif move.due_at is not None:
                values.update(due_at=move.due_at)
            if move.attempt_delta:
                values.update(attempt=F("attempt") + move.attempt_delta)
            updated = jobs.filter(id__in=ids, state=State.LEASED).update(**values)
            if updated != len(ids):
                raise StoreError(f"leased jobs {ids} lost their state under a held lease")
        for change in moves:  # return values are rare and each its own: one UPDATE per job that has one
            if change.output is not None:
                jobs.filter(id=change.job_id).update(output_json=change.output)
        largest = max((len(c.message) + len(c.detail) + len(c.worker) for c in moves), default=0)
        Outcome.objects.using(self.using).bulk_create(
            (
                Outcome(
                    job_id=c.job_id,
                    attempt=c.attempt,
                    worker=c.worker,
                    kind=c.kind,
                    state_after=c.state,
                    message=c.message,
                    detail=c.detail,
                    error_type=c.error_type,
                    started_at=c.started_at,
                    recorded_at=now,
                )
                for c in moves
            ),
            batch_size=self._insert_batch_size(largest),
        )
        self._add_tags((c.job_id, c.tags) for c in moves)
        self._announce_endings(moves)

    def _add_tags(self, tagged: Iterable[tuple[int, Sequence[str]]]) -> None:
        """Give jobs these tags (stored forms), in the caller's transaction; a tag a job holds already is
        passed over (a set)."""
        rows = [JobTag(job_id=job_id, tag=tag) for job_id, tags in tagged for tag in tags]
        if rows:
            JobTag.objects.using(self.using).bulk_create(rows, ignore_conflicts=True)

    # -- heartbeats and expiry ---------------------------------------------------------------------

    def heartbeat(
        self, *, worker_id: str, job_ids: Sequence[int], lease_duration: timedelta, now: datetime
    ) -> list[HeartbeatResult]:
        if not job_ids:
            return []
        with self._write():
            leases = Lease.objects.using(self.using).filter(
                job_id__in=list(job_ids), owner=worker_id, expires_at__gt=now
            )
            renewed = set(leases.select_for_update().values_list("job_id", flat=True))
            Lease.objects.using(self.using).filter(job_id__in=renewed).update(expires_at=now + lease_duration)
            flags = self._cancel_flags(list(renewed))
        return [
            HeartbeatResult(job_id=i, renewed=i in renewed, cancel_requested=flags.get(i, False))
            for i in job_ids
        ]

    @restarted_on_deadlock
    def expire_leases(
        self, *, queues: Sequence[str], max_jobs: int, retry: RetryPolicy, now: datetime
    ) -> int:
        if not queues or max_jobs <= 0:
            return 0
        with self._write():
            lapsed = Lease.objects.using(self.using).filter(queue__in=list(queues), expires_at__lte=now)
            picked = lapsed.order_by("expires_at").select_for_update(skip_locked=True)
            leases = list(picked.values_list("job_id", "attempt", "owner", "claimed_at")[:max_jobs])
            if not leases:
                return 0
            ids = [job_id for job_id, *_ in leases]
            Lease.objects.using(self.using).filter(job_id__in=ids).delete()
            parents = self._lock_with_children(sorted(ids))
            rows = Job.objects.using(self.using).filter(id__in=ids)
            info = {i: (m, c) for i, m, c in rows.values_list("id", "max_attempts", "cancel_requested")}
            self._apply_and_resolve(
                [
                    changes.for_expiry(
                        job_id=job_id,
                        attempt=attempt,
                        owner=owner,
                        max_attempts=info[job_id][0],
                        cancel_requested=info[job_id][1],
                        retry=retry,
                        now=now,
                        started_at=claimed_at,
                    )
                    for job_id, attempt, owner, claimed_at in leases
                ],
                parents,
                now,
            )
        return len(leases)

    # -- operator actions --------------------------------------------------------------------------

    def _audit(self, actor: str, action: str, target: object, now: datetime, detail: str = "") -> None:
        AuditRecord.objects.using(self.using).create(
            actor=clean(actor, 255), action=action, target=str(target), detail=detail, recorded_at=now
        )

    @restarted_on_deadlock
    def cancel(self, job_id: int, *, actor: str, now: datetime) -> CancelResult:
        with self._write():
            found = Job.objects.using(self.using).select_for_update().filter(id=job_id)
            row = found.values_list("state", "wire_name", "queue", "attempt", "has_children").first()
            effect = changes.cancel_effect(State(row[0])) if row else transitions.CancelEffect.REFUSE
            if effect is transitions.CancelEffect.REFUSE:
                return CancelResult.NOT_CANCELLABLE
            assert row is not None  # refused above otherwise
            job = Job.objects.using(self.using).filter(id=job_id)
            if effect is transitions.CancelEffect.REQUEST:
                job.update(cancel_requested=True)
                result = CancelResult.REQUESTED
            else:
                cause = clean(transitions.cancel_cause(actor))
                job.update(state=State.CANCELLED, terminal_at=now, terminal_cause=cause)
                result = CancelResult.CANCELLED
                self._announce(lambda: [self._operator_move(job_id, row, State.CANCELLED, cause, "cancel")])
                if row[4]:  # its children's rows are newer: locked after its own
                    self._resolve_children({job_id: State.CANCELLED}, now)
            self._audit(actor, AuditRecord.Action.CANCEL, job_id, now, detail=result.value)
        return result

    def requeue(self, job_id: int, *, actor: str, now: datetime) -> RequeueResult:
        with self._write():
            schedule = Job.objects.using(self.using).filter(id=job_id).values_list("schedule", flat=True)
            name = schedule.first()
            if name is not None:
                self._lock_schedule(name)  # a run made live again: a mint in flight waits, then sees it
            found = Job.objects.using(self.using).select_for_update().filter(id=job_id)
            row = found.values_list("state", "queue", "wire_name", "unique_key").first()
            if row is None or not changes.can_requeue(State(row[0])):
                return RequeueResult.NOT_REQUEUEABLE
            if row[3] is not None and inserts.live_holder(self, row[2], row[3]) is not None:
                return RequeueResult.KEY_TAKEN
            try:
                with transaction.atomic(using=self.using):  # a savepoint: the key may be taken meanwhile
                    found.update(
                        state=State.SCHEDULED,
                        attempt=0,
                        due_at=now,
                        terminal_at=None,
                        terminal_cause="",
                        cancel_requested=False,
                        output_json=None,
                    )
            except IntegrityError:
                return RequeueResult.KEY_TAKEN
            self._audit(actor, AuditRecord.Action.REQUEUE, job_id, now)
            self._hint_this_process([row[1]])
            cause = clean(announced.requeue_cause(actor))
            moved = (row[0], row[2], row[1], 0)  # (state, wire name, queue, attempt)
            self._announce(lambda: [self._operator_move(job_id, moved, State.SCHEDULED, cause, "requeue")])
        return RequeueResult.REQUEUED

    @staticmethod
    def _operator_move(
        job_id: int, row: Sequence[Any], after: State, cause: str, operation: str
    ) -> announced.Transition:
        """An operator's move of one job; ``row``: its (state before, wire name, queue, attempt)."""
        return announced.Transition(
            job_id=job_id, wire_name=row[1], queue=row[2], from_state=State(row[0]), to_state=after,
            attempt=row[3], cause=cause, operation=operation,
        )  # fmt: skip

    def _change_queue(self, queue: str, actor: str, now: datetime, action: str, **values: Any) -> None:
        problem = queue_name_problem(queue)
        if problem:
            raise StoreError(problem)
        with self._write():
            self._lock_queue_for_change(queue)  # waits for claims in flight; claims after it see the change
            QueueSettings.objects.using(self.using).update_or_create(
                queue=queue, defaults={**values, "updated_at": now}
            )
            self._audit(actor, action, queue, now, detail=", ".join(f"{k}={v}" for k, v in values.items()))
        if values.get("paused") is False:
            wakeups.publish([queue])

    def pause_queue(self, queue: str, *, actor: str, now: datetime) -> None:
        self._change_queue(queue, actor, now, AuditRecord.Action.PAUSE_QUEUE, paused=True)

    def resume_queue(self, queue: str, *, actor: str, now: datetime) -> None:
        self._change_queue(queue, actor, now, AuditRecord.Action.RESUME_QUEUE, paused=False)

    def set_concurrency_limit(self, queue: str, limit: int | None, *, actor: str, now: datetime) -> None:
        check_concurrency_limit(limit)
        action = AuditRecord.Action.SET_CONCURRENCY_LIMIT
        self._change_queue(queue, actor, now, action, concurrency_limit=limit)

    # -- pump health -------------------------------------------------------------------------------

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
        with self._write():  # a read then a write: on SQLite it waits for the write lock at BEGIN
            PumpStatus.objects.using(self.using).update_or_create(
                worker_id=worker_id,
                defaults={
                    "group": group,
                    "host": host,
                    "pid": pid,
                    "queues": ",".join(queues),
                    "health": health,
                    "detail": clean(detail, MAX_HEALTH_DETAIL_BYTES),
                    "started_at": started_at,
                    "last_beat_at": now,
                },
            )

    def forget_pumps(self, *, silent_since: datetime) -> int:
        stale = PumpStatus.objects.using(self.using).filter(last_beat_at__lt=silent_since)
        return int(stale.delete()[0])

    def forget_pump(self, worker_id: str) -> bool:
        return bool(PumpStatus.objects.using(self.using).filter(worker_id=worker_id).delete()[0])

    # -- reads -------------------------------------------------------------------------------------

    def next_due(self, queues: Sequence[str], *, now: datetime) -> datetime | None:
        paused = QueueSettings.objects.using(self.using).filter(queue__in=queues, paused=True)
        active = set(queues) - set(paused.values_list("queue", flat=True))
        scheduled = Job.objects.using(self.using).filter(state=State.SCHEDULED, queue__in=active)
        first = scheduled.order_by("due_at").values_list("due_at", flat=True).first()
        return None if first is None else max(first, now)  # due work already waiting: now

    def next_lease_expiry(self, queues: Sequence[str]) -> datetime | None:
        leases = Lease.objects.using(self.using).filter(queue__in=list(queues))
        return leases.order_by("expires_at").values_list("expires_at", flat=True).first()

    def upcoming(self, queues: Sequence[str], *, after: datetime) -> datetime | None:
        jobs = Job.objects.using(self.using).filter(
            state=State.SCHEDULED, queue__in=list(queues), due_at__gt=after
        )
        leases = Lease.objects.using(self.using).filter(queue__in=list(queues), expires_at__gt=after)
        times = [
            jobs.order_by("due_at").values_list("due_at", flat=True).first(),
            leases.order_by("expires_at").values_list("expires_at", flat=True).first(),
        ]
        present = [t for t in times if t is not None]
        return min(present) if present else None

    def get_job(self, job_id: int) -> JobView | None:
        row = (
            Job.objects.using(self.using)
            .filter(id=job_id)
            .values(*_JOB_FIELDS, output=F("output_json"))
            .first()
        )
        if row is None:
            return None
        return JobView(**{**row, "state": State(row["state"]), "run_on": RunOn(row["run_on"])})

    def get_lease(self, job_id: int) -> LeaseView | None:
        fields = ("job_id", "queue", "owner", "attempt", "claimed_at", "expires_at")
        row = Lease.objects.using(self.using).filter(job_id=job_id).values(*fields).first()
        return None if row is None else LeaseView(**row)

    def list_outcomes(self, job_id: int) -> list[OutcomeView]:
        fields = (
            "job_id", "attempt", "worker", "kind", "state_after", "message", "detail", "recorded_at",
            "error_type", "started_at",
        )  # fmt: skip
        rows = Outcome.objects.using(self.using).filter(job_id=job_id).order_by("id").values(*fields)
        return [
            OutcomeView(**{**r, "kind": OutcomeKind(r["kind"]), "state_after": State(r["state_after"])})
            for r in rows
        ]

    def list_audit(self, target: str | None = None) -> list[AuditView]:
        rows = AuditRecord.objects.using(self.using).order_by("id")
        if target is not None:
            rows = rows.filter(target=target)
        fields = ("actor", "action", "target", "detail", "recorded_at")
        return [AuditView(**r) for r in rows.values(*fields)]

    def list_queues(self) -> list[QueueView]:
        rows = QueueSettings.objects.using(self.using).order_by("queue")
        return [QueueView(**r) for r in rows.values("queue", "paused", "concurrency_limit")]

    def list_tags(self, job_id: int) -> list[str]:
        rows = JobTag.objects.using(self.using).filter(job_id=job_id).order_by("tag")
        return list(rows.values_list("tag", flat=True))

    def list_pumps(self) -> list[PumpView]:
        rows = PumpStatus.objects.using(self.using).order_by("group", "worker_id")
        return [
            PumpView(
                worker_id=p.worker_id,
                group=p.group,
                host=p.host,
                pid=p.pid,
                queues=tuple(q for q in p.queues.split(",") if q),
                health=Health(p.health),
                detail=p.detail,
                started_at=p.started_at,
                last_beat_at=p.last_beat_at,
            )
            for p in rows
        ]
