"""The Django store: the Storage Contract on PostgreSQL and SQLite through the ORM.

PostgreSQL: claims pick rows with ``SELECT ... FOR UPDATE SKIP LOCKED``, so any number of Pumps claim disjoint
rows with no coordination. A queue's settings are guarded by an advisory lock keyed on the queue name: claims
take it shared, operator changes take it exclusive, so a first-ever pause or limit can never slip past a claim
that is in flight. Claims on a limited queue also lock its settings row, so the leased count they read cannot
be raced.

SQLite: there are no row locks. Every write transaction begins IMMEDIATE, taking the database's write lock up
front, so claims serialize across threads and processes and wait (busy timeout) instead of failing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import F

from .. import wakeups
from ..core.records import ClaimedJob, HeartbeatResult, OutcomeKind, OutcomeReport
from ..core.retry import RetryPolicy
from ..core.states import State
from ..models import AuditRecord, Job, Lease, Outcome, PumpStatus, QueueSettings
from .contract import (
    MAX_DETAIL_BYTES,
    MAX_QUEUE_NAME_LENGTH,
    MAX_WIRE_NAME_LENGTH,
    CancelResult,
    NewJob,
    PayloadTooLarge,
    ReportResult,
    RequeueResult,
    StoreError,
    WireNameTooLong,
)

#: The first key of our two-key advisory locks, so they never collide with an application's own.
ADVISORY_CLASS = 0x4257  # "BW"
LOCK_QUEUES_SHARED = "SELECT pg_advisory_xact_lock_shared(%s, hashtext(q)) FROM unnest(%s::text[]) AS q"
LOCK_QUEUE_EXCLUSIVE = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
NOTIFY = "SELECT pg_notify(%s, q) FROM unnest(%s::text[]) AS q"
HINT_CHANNEL = "backwave"

_CLAIMED_FIELDS = ("id", "wire_name", "queue", "payload", "attempt", "max_attempts", "due_at")


def _truncate(text: str, limit: int = MAX_DETAIL_BYTES) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")


class DjangoStore:
    """The Storage Contract over one Django database alias."""

    supports_transactional_enqueue = True

    def __init__(self, using: str = "default") -> None:
        self.using = using

    @property
    def connection(self) -> Any:
        return connections[self.using]

    @property
    def is_postgres(self) -> bool:
        return bool(self.connection.vendor == "postgresql")

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

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)

    # -- enqueue -----------------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[Job]:
        for new in jobs:
            _check_bounds(new, max_payload_bytes)
        rows = [
            Job(
                wire_name=new.wire_name,
                queue=new.queue,
                payload=new.payload,
                max_attempts=new.max_attempts,
                due_at=new.due_at,
                created_at=now,
            )
            for new in jobs
        ]
        due_queues = sorted({new.queue for new in jobs if new.due_at <= now})
        with self._write():
            Job.objects.using(self.using).bulk_create(rows)
            if due_queues and self.is_postgres:
                self._execute(NOTIFY, [HINT_CHANNEL, due_queues])  # delivered at commit, and only then
            if due_queues:
                transaction.on_commit(lambda: wakeups.publish(due_queues), using=self.using)
        return rows

    # -- claim -------------------------------------------------------------------------------------

    def _queue_settings(self, queues: Sequence[str]) -> dict[str, tuple[bool, int | None]]:
        """(paused, limit) of the queues that have settings. On PostgreSQL the queues' advisory locks are
        taken shared first, in their own statement, so this read sees any operator change committed."""
        if self.is_postgres:
            self._execute(LOCK_QUEUES_SHARED, [ADVISORY_CLASS, list(queues)])
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
            for queue in queues:
                take = max_jobs - len(claimed)
                if take <= 0:
                    break
                paused, limit = settings.get(queue, (False, None))
                if paused:
                    continue
                if limit is not None:  # limited claimers serialize on the settings row
                    take = min(take, self._free_slots(queue))
                    if take > 0:
                        claimed += self._claim_queue(worker_id, queue, take, lease_duration, now)
                else:
                    claimed += self._claim_unlimited(worker_id, queue, take, lease_duration, now)
        return claimed

    def _claim_unlimited(
        self, worker_id: str, queue: str, take: int, lease_duration: timedelta, now: datetime
    ) -> list[ClaimedJob]:
        """A queue with no limit (as far as this transaction has read): the store's fastest claim."""
        return self._claim_queue(worker_id, queue, take, lease_duration, now)

    def _free_slots(self, queue: str) -> int:
        """Slots left under a queue's limit, read under its settings row lock (limited claimers serialize)."""
        config = QueueSettings.objects.using(self.using).select_for_update().get(queue=queue)
        if config.paused or config.concurrency_limit is None:
            return 0 if config.paused else 1 << 30
        leased = Lease.objects.using(self.using).filter(queue=queue).count()
        return max(0, config.concurrency_limit - leased)

    def _claim_queue(
        self, worker_id: str, queue: str, take: int, lease_duration: timedelta, now: datetime
    ) -> list[ClaimedJob]:
        jobs = Job.objects.using(self.using)
        picked = jobs.claimable([queue], now).select_for_update(skip_locked=True).values_list("id", flat=True)
        ids = list(picked[:take])
        if not ids:
            return []
        jobs.filter(id__in=ids, state=State.SCHEDULED).update(state=State.LEASED, attempt=F("attempt") + 1)
        rows = list(jobs.filter(id__in=ids).order_by("due_at", "id").values_list(*_CLAIMED_FIELDS))
        expires = now + lease_duration
        Lease.objects.using(self.using).bulk_create(
            Lease(job_id=r[0], queue=r[2], owner=worker_id, attempt=r[4], claimed_at=now, expires_at=expires)
            for r in rows
        )
        return [ClaimedJob(**dict(zip(_CLAIMED_FIELDS, r, strict=True))) for r in rows]

    # -- outcomes ----------------------------------------------------------------------------------

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        now: datetime,
        details: Mapping[int, str] | None = None,
    ) -> ReportResult:
        if not reports:
            return ReportResult(applied=frozenset(), stale=frozenset())
        details = details or {}
        with self._write():
            held = self._fence(worker_id, {(r.job_id, r.attempt) for r in reports}, now)
            applied = _first_report_per_lease(reports, held)
            cancel_flags = self._cancel_flags([r.job_id for r in applied])
            changes = [
                _Change.for_report(
                    r, cancel_flags.get(r.job_id, False), now, worker_id, details.get(r.job_id)
                )
                for r in applied
            ]
            self._apply(changes, now)
        ids = {r.job_id for r in reports}
        return ReportResult(applied=frozenset(held), stale=frozenset(ids - held.keys()))

    def _fence(self, worker_id: str, attempts: set[tuple[int, int]], now: datetime) -> dict[int, int]:
        """Delete the leases this worker still holds, live at ``now``, for these (job, Attempt) pairs.

        Returns the attempt of each lease deleted, by job id.
        """
        job_ids = list({job_id for job_id, _ in attempts})
        leases = Lease.objects.using(self.using).filter(job_id__in=job_ids, owner=worker_id)
        live = leases.filter(expires_at__gt=now).select_for_update().values_list("job_id", "attempt")
        held = {job_id: attempt for job_id, attempt in live if (job_id, attempt) in attempts}
        if held:
            Lease.objects.using(self.using).filter(job_id__in=list(held)).delete()
        return held

    def _cancel_flags(self, ids: Sequence[int]) -> dict[int, bool]:
        if not ids:
            return {}
        flagged = Job.objects.using(self.using).filter(id__in=ids, cancel_requested=True)
        return dict.fromkeys(flagged.values_list("id", flat=True), True)

    def _apply(self, changes: Sequence[_Change], now: datetime) -> None:
        """Move leased jobs to their next states, grouped so each distinct change is one UPDATE."""
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for change in changes:
            groups[change.update_key].append(change.job_id)
        jobs = Job.objects.using(self.using)
        for (state, due_at, cause, attempt_delta), ids in groups.items():
            values: dict[str, Any] = {"state": state}
            if state == State.SCHEDULED:
                values.update(due_at=due_at)
            else:  # a finished job has nothing left to cancel
                values.update(terminal_at=now, terminal_cause=cause, cancel_requested=False)
            if attempt_delta:
                values.update(attempt=F("attempt") + attempt_delta)
            updated = jobs.filter(id__in=ids, state=State.LEASED).update(**values)
            if updated != len(ids):
                raise AssertionError(f"leased jobs {ids} lost their state under a held lease")
        Outcome.objects.using(self.using).bulk_create(change.outcome() for change in changes)

    # -- heartbeats, expiry, release ---------------------------------------------------------------

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

    def expire_leases(
        self, *, queues: Sequence[str], max_jobs: int, retry: RetryPolicy, now: datetime
    ) -> int:
        if not queues or max_jobs <= 0:
            return 0
        with self._write():
            lapsed = Lease.objects.using(self.using).filter(queue__in=list(queues), expires_at__lte=now)
            picked = lapsed.order_by("expires_at").select_for_update(skip_locked=True)
            leases = list(picked.values_list("job_id", "attempt", "owner")[:max_jobs])
            if not leases:
                return 0
            ids = [job_id for job_id, _, _ in leases]
            Lease.objects.using(self.using).filter(job_id__in=ids).delete()
            rows = Job.objects.using(self.using).filter(id__in=ids)
            info = {i: (m, c) for i, m, c in rows.values_list("id", "max_attempts", "cancel_requested")}
            changes = [
                _Change.for_expiry(job_id, attempt, owner, *info[job_id], retry, now)
                for job_id, attempt, owner in leases
            ]
            self._apply(changes, now)
        return len(leases)

    def release(self, *, worker_id: str, job_ids: Sequence[int], now: datetime) -> int:
        if not job_ids:
            return 0
        with self._write():
            held = Lease.objects.using(self.using).filter(
                job_id__in=list(job_ids), owner=worker_id, expires_at__gt=now
            )  # a lapsed lease is the sweep's: its Attempt counts
            leases = list(held.select_for_update().values_list("job_id", "attempt"))
            if not leases:
                return 0
            Lease.objects.using(self.using).filter(job_id__in=[i for i, _ in leases]).delete()
            flags = self._cancel_flags([i for i, _ in leases])
            changes = [_Change.for_release(i, a, worker_id, flags.get(i, False), now) for i, a in leases]
            self._apply(changes, now)
        return len(leases)

    # -- operator actions --------------------------------------------------------------------------

    def _audit(self, actor: str, action: str, target: object, now: datetime, detail: str = "") -> None:
        AuditRecord.objects.using(self.using).create(
            actor=actor, action=action, target=str(target), detail=detail, recorded_at=now
        )

    def cancel(self, job_id: int, *, actor: str, now: datetime) -> CancelResult:
        with self._write():
            job = Job.objects.using(self.using).select_for_update().filter(id=job_id).first()
            if job is None or State(job.state).is_terminal:
                return CancelResult.NOT_CANCELLABLE
            if job.state == State.LEASED:
                Job.objects.using(self.using).filter(id=job_id).update(cancel_requested=True)
                result = CancelResult.REQUESTED
            else:
                Job.objects.using(self.using).filter(id=job_id).update(
                    state=State.CANCELLED, terminal_at=now, terminal_cause=f"cancelled by {actor}"
                )
                result = CancelResult.CANCELLED
            self._audit(actor, AuditRecord.Action.CANCEL, job_id, now, detail=result.value)
        return result

    def requeue(self, job_id: int, *, actor: str, now: datetime) -> RequeueResult:
        with self._write():
            updated = (
                Job.objects.using(self.using)
                .filter(id=job_id, state__in=[State.DEAD_LETTERED, State.QUARANTINED])
                .update(
                    state=State.SCHEDULED,
                    attempt=0,
                    due_at=now,
                    terminal_at=None,
                    terminal_cause="",
                    cancel_requested=False,
                )
            )
            if not updated:
                return RequeueResult.NOT_REQUEUEABLE
            self._audit(actor, AuditRecord.Action.REQUEUE, job_id, now)
            queue = Job.objects.using(self.using).values_list("queue", flat=True).get(id=job_id)
            transaction.on_commit(lambda: wakeups.publish([queue]), using=self.using)
        return RequeueResult.REQUEUED

    def _change_queue(self, queue: str, actor: str, now: datetime, action: str, **values: Any) -> None:
        if not queue or len(queue) > MAX_QUEUE_NAME_LENGTH:
            raise StoreError(f"queue name {queue!r} must be 1 to {MAX_QUEUE_NAME_LENGTH} characters")
        with self._write():
            if self.is_postgres:  # waits for claims in flight; claims after it see the change
                self._execute(LOCK_QUEUE_EXCLUSIVE, [ADVISORY_CLASS, queue])
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
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise StoreError(f"a concurrency limit is an int >= 0 or None, not {limit!r}")
        action = AuditRecord.Action.SET_CONCURRENCY_LIMIT
        self._change_queue(queue, actor, now, action, concurrency_limit=limit)

    # -- pump health -------------------------------------------------------------------------------

    def record_pump(
        self,
        *,
        worker_id: str,
        group: str,
        queues: Sequence[str],
        health: str,
        detail: str,
        started_at: datetime,
        now: datetime,
    ) -> None:
        """Upsert what a Pump says about itself; ``backwave_health`` and the admin read it."""
        host, pid = worker_id.split(":")[0], int(worker_id.split(":")[1])
        PumpStatus.objects.using(self.using).update_or_create(
            worker_id=worker_id,
            defaults={
                "group": group,
                "host": host,
                "pid": pid,
                "queues": ",".join(queues),
                "health": health,
                "detail": detail[:2000],
                "started_at": started_at,
                "last_beat_at": now,
            },
        )

    def forget_pumps(self, *, silent_since: datetime) -> int:
        """Delete the status rows of pumps that have not beaten since ``silent_since``."""
        stale = PumpStatus.objects.using(self.using).filter(last_beat_at__lt=silent_since)
        return int(stale.delete()[0])

    # -- reads -------------------------------------------------------------------------------------

    def next_due(self, queues: Sequence[str], *, now: datetime) -> datetime | None:
        paused = QueueSettings.objects.using(self.using).filter(queue__in=queues, paused=True)
        active = set(queues) - set(paused.values_list("queue", flat=True))
        scheduled = Job.objects.using(self.using).filter(state=State.SCHEDULED, queue__in=active)
        first = scheduled.order_by("due_at").values_list("due_at", flat=True).first()
        return None if first is None else max(first, now)  # due work already waiting: now

    def next_lease_expiry(self, queues: Sequence[str]) -> datetime | None:
        """When the first lease in ``queues`` lapses (its job then becomes due again), or None."""
        leases = Lease.objects.using(self.using).filter(queue__in=list(queues))
        return leases.order_by("expires_at").values_list("expires_at", flat=True).first()

    def count_live(self, queues: Sequence[str]) -> int:
        return Job.objects.using(self.using).live().filter(queue__in=list(queues)).count()


def _check_bounds(new: NewJob, max_payload_bytes: int) -> None:
    if not new.wire_name or len(new.wire_name) > MAX_WIRE_NAME_LENGTH:
        raise WireNameTooLong(f"wire name {new.wire_name!r} must be 1 to {MAX_WIRE_NAME_LENGTH} characters")
    if not new.queue or len(new.queue) > MAX_QUEUE_NAME_LENGTH:
        raise StoreError(f"queue name {new.queue!r} must be 1 to {MAX_QUEUE_NAME_LENGTH} characters")
    size = len(new.payload.encode("utf-8"))
    if size > max_payload_bytes:
        raise PayloadTooLarge(
            f"the payload of {new.wire_name!r} is {size} bytes; the limit is {max_payload_bytes} "
            "(BACKWAVE['MAX_PAYLOAD_BYTES']). Store large data elsewhere and pass a reference."
        )
    if new.max_attempts < 1:
        raise StoreError(f"max_attempts must be at least 1, got {new.max_attempts}")


def _first_report_per_lease(reports: Sequence[OutcomeReport], held: Mapping[int, int]) -> list[OutcomeReport]:
    """The reports that passed the fence; a job listed twice applies once, by its first matching row."""
    applied: dict[int, OutcomeReport] = {}
    for r in reports:
        if held.get(r.job_id) == r.attempt:
            applied.setdefault(r.job_id, r)
    return list(applied.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class _Change:
    """Where one leased job goes next, and the Outcome row that records why."""

    job_id: int
    attempt: int
    kind: OutcomeKind
    state: State
    worker: str
    now: datetime
    due_at: datetime | None = None
    cause: str = ""
    detail: str = ""
    attempt_delta: int = 0  # -1 for a release: that Attempt does not count

    @property
    def update_key(self) -> tuple[Any, ...]:
        return (self.state, self.due_at, self.cause, self.attempt_delta)

    def outcome(self) -> Outcome:
        return Outcome(
            job_id=self.job_id,
            attempt=self.attempt,
            worker=self.worker,
            kind=self.kind,
            state_after=self.state,
            message=_truncate(self.cause, 2000),
            detail=_truncate(self.detail),
            recorded_at=self.now,
        )

    @classmethod
    def for_report(
        cls, report: OutcomeReport, cancel_requested: bool, now: datetime, worker: str, detail: str | None
    ) -> _Change:
        kind, message, due_at = report.kind, report.message, None
        if kind is OutcomeKind.SUCCEEDED:
            state = State.SUCCEEDED
        elif kind is OutcomeKind.CANCELLED or (kind is OutcomeKind.FAILED and cancel_requested):
            state, message = State.CANCELLED, "operator-cancel"  # a cancelled job is not retried
        elif kind is OutcomeKind.UNROUTABLE:
            state = State.QUARANTINED
        elif kind is OutcomeKind.FAILED and report.retry_at is not None:
            state, due_at = State.SCHEDULED, report.retry_at
        elif kind is OutcomeKind.FAILED:
            state = State.DEAD_LETTERED
        else:
            raise StoreError(f"a worker cannot report the outcome {kind!r}")
        return cls(
            job_id=report.job_id, attempt=report.attempt, kind=kind, state=state, worker=worker, now=now,
            due_at=due_at, cause=message, detail=detail or "",
        )  # fmt: skip

    @classmethod
    def for_expiry(
        cls, job_id: int, attempt: int, owner: str, max_attempts: int, cancel_requested: bool,
        retry: RetryPolicy, now: datetime,
    ) -> _Change:  # fmt: skip
        retry_at = retry.next_attempt_at(attempt, max_attempts, now, key=job_id)
        if cancel_requested:
            state, cause = State.CANCELLED, "operator-cancel (its lease expired)"
        elif retry_at is None:
            state, cause = State.DEAD_LETTERED, f"lease expired on attempt {attempt} (ceiling reached)"
        else:
            state, cause = State.SCHEDULED, f"lease expired on attempt {attempt}"
        return cls(
            job_id=job_id, attempt=attempt, kind=OutcomeKind.EXPIRED, state=state, worker=owner, now=now,
            due_at=retry_at if state == State.SCHEDULED else None, cause=cause,
        )  # fmt: skip

    @classmethod
    def for_release(
        cls, job_id: int, attempt: int, worker: str, cancel_requested: bool, now: datetime
    ) -> _Change:
        kind = OutcomeKind.RELEASED
        if cancel_requested:
            return cls(
                job_id=job_id, attempt=attempt, kind=kind, worker=worker, now=now,
                state=State.CANCELLED, cause="operator-cancel",
            )  # fmt: skip
        return cls(
            job_id=job_id, attempt=attempt, kind=kind, worker=worker, now=now,
            state=State.SCHEDULED, due_at=now, cause="released at shutdown", attempt_delta=-1,
        )  # fmt: skip
