"""Helpers for the conformance suite: short ways to enqueue, claim and report through the contract, and the
one per-store inspection helper for what the contract has no read for.

Every helper takes ``now`` explicitly (defaulting to ``T0``); nothing here reads the wall clock. Only
:func:`inspect` knows what kind of store it holds; everything else speaks the Storage Contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from backwave_django.core.records import ClaimedJob, HeartbeatResult, OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import State
from backwave_django.store.contract import (
    EnqueuedJob,
    JobStore,
    JobView,
    NewJob,
    OutcomeDetail,
    ReportResult,
)
from backwave_django.store.memory import MemoryStore

from ..conftest import LEASE, T0

MAX_PAYLOAD = 65536
#: One-second-doubling backoff without jitter, so retries land at now + 2 s, 4 s, ...
RETRY = RetryPolicy(max_attempts=10, backoff_base=2.0, backoff_cap=300.0, jitter=False)
#: Retries due at once, for tests that cycle a job through many Attempts.
NO_BACKOFF = RetryPolicy(backoff_base=1.0, backoff_cap=0.0, jitter=False)
WORKER = "host:1:default:a"
OTHER_WORKER = "host:2:default:b"
UNKNOWN_ID = 10**9


# -- jobs in -------------------------------------------------------------------------------------------


def new_job(
    wire_name: str = "tests.noop",
    *,
    queue: str = "default",
    due_at: datetime = T0,
    max_attempts: int = 3,
    payload: str = "{}",
    timeout: timedelta | None = None,
    priority: int = 0,
    unique_key: str | None = None,
    trace_context: str = "",
    tags: tuple[str, ...] = (),
) -> NewJob:
    return NewJob(
        wire_name=wire_name,
        queue=queue,
        due_at=due_at,
        max_attempts=max_attempts,
        payload=payload,
        timeout=timeout,
        priority=priority,
        unique_key=unique_key,
        trace_context=trace_context,
        tags=tags,
    )


def enqueue(store: JobStore, count: int = 1, *, now: datetime = T0, **fields: Any) -> list[EnqueuedJob]:
    """Enqueue ``count`` identical jobs in one call."""
    return store.enqueue([new_job(**fields) for _ in range(count)], now=now, max_payload_bytes=MAX_PAYLOAD)


def enqueue_one(store: JobStore, *, now: datetime = T0, **fields: Any) -> EnqueuedJob:
    return enqueue(store, 1, now=now, **fields)[0]


# -- the Pump's cycle ------------------------------------------------------------------------------------


def claim(
    store: JobStore,
    *,
    worker: str = WORKER,
    queues: Sequence[str] = ("default",),
    max_jobs: int = 10,
    now: datetime = T0,
    lease: timedelta = LEASE,
) -> list[ClaimedJob]:
    return store.claim(
        worker_id=worker, queues=list(queues), max_jobs=max_jobs, lease_duration=lease, now=now
    )


def claim_one(store: JobStore, **kwargs: Any) -> ClaimedJob:
    claimed = claim(store, max_jobs=1, **kwargs)
    assert len(claimed) == 1, f"expected one claimable job, got {claimed}"
    return claimed[0]


def outcome(
    job: ClaimedJob,
    kind: OutcomeKind,
    *,
    attempt: int | None = None,
    message: str = "",
    max_attempts: int | None = None,
) -> OutcomeReport:
    """The report a worker holding ``job`` writes (its Attempt and ceiling as claimed, unless given)."""
    return OutcomeReport(
        job_id=job.id,
        attempt=job.attempt if attempt is None else attempt,
        kind=kind,
        max_attempts=job.max_attempts if max_attempts is None else max_attempts,
        message=message,
    )


def report(
    store: JobStore,
    *reports: OutcomeReport,
    worker: str = WORKER,
    now: datetime = T0,
    retry: RetryPolicy = RETRY,
    details: dict[int, OutcomeDetail] | None = None,
) -> ReportResult:
    return store.report(worker_id=worker, reports=list(reports), retry=retry, now=now, details=details)


def beat(
    store: JobStore,
    job_ids: Sequence[int],
    *,
    worker: str = WORKER,
    now: datetime,
    lease: timedelta = LEASE,
) -> list[HeartbeatResult]:
    return store.heartbeat(worker_id=worker, job_ids=list(job_ids), lease_duration=lease, now=now)


def sweep(
    store: JobStore,
    *,
    now: datetime,
    queues: Sequence[str] = ("default",),
    max_jobs: int = 100,
    retry: RetryPolicy = RETRY,
) -> int:
    return store.expire_leases(queues=list(queues), max_jobs=max_jobs, retry=retry, now=now)


# -- reads -----------------------------------------------------------------------------------------------


def job(store: JobStore, job_id: int) -> JobView:
    found = store.get_job(job_id)
    assert found is not None, f"job {job_id} is not in the store"
    return found


def state_of(store: JobStore, job_id: int) -> State:
    return job(store, job_id).state


def audit_rows(store: JobStore) -> list[tuple[str, str, str]]:
    """(actor, action, target) of every audit record, oldest first."""
    return [(a.actor, a.action, a.target) for a in store.list_audit()]


def job_in_state(store: JobStore, state: State, *, now: datetime = T0, **fields: Any) -> int:
    """A job brought to ``state`` through the contract at ``now``, due an hour before (leased: by WORKER,
    attempt 1). Call it before enqueuing other due work in the same queue: it claims the queue's first job."""
    fields.setdefault("due_at", now - timedelta(hours=1))
    if state is State.DEAD_LETTERED:
        fields.setdefault("max_attempts", 1)  # its one failure reaches the ceiling
    [new] = enqueue(store, now=now, **fields)
    if state is State.SCHEDULED:
        return new.id
    if state is State.CANCELLED:
        store.cancel(new.id, actor="setup", now=now)
        return new.id
    leased = claim_one(store, queues=[fields.get("queue", "default")], now=now)
    assert leased.id == new.id, "job_in_state claimed another job: call it before enqueuing due work"
    kind = {
        State.LEASED: None,
        State.SUCCEEDED: OutcomeKind.SUCCEEDED,
        State.DEAD_LETTERED: OutcomeKind.FAILED,
        State.QUARANTINED: OutcomeKind.UNROUTABLE,
    }[state]
    if kind is not None:
        report(store, outcome(leased, kind, message=f"made {state}"), now=now)
    assert state_of(store, new.id) is state
    return new.id


# -- inspection: what the contract has no read for ---------------------------------------------------------


class Inspection(Protocol):
    """A look inside one store, for what the contract cannot say (every row at once, or a corrupted row)."""

    def snapshot(self) -> dict[str, list[Any]]:
        """Everything the store holds, so a test can assert that an operation changed nothing at all."""
        ...

    def leased_in(self, queue: str) -> int:
        """How many jobs of ``queue`` hold a lease now."""
        ...

    def rows_by_job(self) -> dict[int, tuple[Any, ...]]:
        """Everything stored about each job (its row, its lease, its outcomes), to tell which jobs an
        operation touched without reading every job through the contract."""
        ...

    def corrupt_state(self, job_id: int, state: State) -> None:
        """Set a job's state behind the store's back (leaving its lease), as only a bug could."""
        ...


class _MemoryInspection:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def snapshot(self) -> dict[str, list[Any]]:
        store = self.store
        return {
            "jobs": store.all_jobs(),
            "leases": store.all_leases(),
            "outcomes": [o for j in store.all_jobs() for o in store.list_outcomes(j.id)],
            "audit": store.list_audit(),
            "settings": store.list_queues(),
            "pumps": store.list_pumps(),
        }

    def leased_in(self, queue: str) -> int:
        return sum(1 for lease in self.store.all_leases() if lease.queue == queue)

    def rows_by_job(self) -> dict[int, tuple[Any, ...]]:
        store = self.store
        leases = {lease.job_id: lease for lease in store.all_leases()}
        return {j.id: (j, leases.get(j.id), tuple(store.list_outcomes(j.id))) for j in store.all_jobs()}

    def corrupt_state(self, job_id: int, state: State) -> None:
        with self.store._lock:
            self.store._jobs[job_id] = replace(self.store._jobs[job_id], state=state)


class _DatabaseInspection:
    def __init__(self, using: str) -> None:
        self.using = using

    def snapshot(self) -> dict[str, list[Any]]:
        from backwave_django.models import AuditRecord, Job, Lease, Outcome, PumpStatus, QueueSettings

        tables = {
            "jobs": (Job, "id"),
            "leases": (Lease, "job_id"),
            "outcomes": (Outcome, "id"),
            "audit": (AuditRecord, "id"),
            "settings": (QueueSettings, "queue"),
            "pumps": (PumpStatus, "worker_id"),
        }
        return {
            name: list(model.objects.using(self.using).order_by(key).values())  # type: ignore[attr-defined]
            for name, (model, key) in tables.items()
        }

    def leased_in(self, queue: str) -> int:
        from backwave_django.models import Lease

        return Lease.objects.using(self.using).filter(queue=queue).count()

    def rows_by_job(self) -> dict[int, tuple[Any, ...]]:
        from backwave_django.models import Job, Lease, Outcome

        leases = {row[0]: row for row in Lease.objects.using(self.using).values_list()}
        outcomes: dict[int, list[tuple[Any, ...]]] = {}
        for row in Outcome.objects.using(self.using).order_by("id").values_list():
            outcomes.setdefault(row[1], []).append(row)  # (id, job_id, attempt, ...)
        return {
            row[0]: (row, leases.get(row[0]), tuple(outcomes.get(row[0], ())))
            for row in Job.objects.using(self.using).values_list()
        }

    def corrupt_state(self, job_id: int, state: State) -> None:
        from backwave_django.models import Job

        Job.objects.using(self.using).filter(id=job_id).update(state=state)


def inspect(store: JobStore) -> Inspection:
    """The inspection helper for ``store``: the memory store's own lists, or the database's tables."""
    if isinstance(store, MemoryStore):
        return _MemoryInspection(store)
    return _DatabaseInspection(store.using)


def snapshot(store: JobStore) -> dict[str, list[Any]]:
    return inspect(store).snapshot()
