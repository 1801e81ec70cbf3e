"""Helpers for the conformance suite: short ways to enqueue, claim and report, and a whole-store snapshot.

Every helper takes ``now`` explicitly (defaulting to ``T0``); nothing here reads the wall clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from backwave_django.core.records import ClaimedJob, OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy
from backwave_django.models import AuditRecord, Job, Lease, Outcome, QueueSettings
from backwave_django.store.contract import NewJob, ReportResult
from backwave_django.store.django import DjangoStore

from ..conftest import LEASE, T0

MAX_PAYLOAD = 65536
#: One-second-doubling backoff, so expiry retries land at now + 2 s, 4 s, ...
RETRY = RetryPolicy(max_attempts=10, backoff_base=2.0, backoff_cap=300.0, jitter=False)
#: Retries due at once after an expiry, for tests that cycle a job through many Attempts.
NO_BACKOFF = RetryPolicy(backoff_base=1.0, backoff_cap=0.0, jitter=False)
WORKER = "host:1:default:a"
OTHER_WORKER = "host:2:default:b"


def new_job(
    wire_name: str = "tests.noop",
    *,
    queue: str = "default",
    due_at: datetime = T0,
    max_attempts: int = 3,
    payload: str = "{}",
) -> NewJob:
    return NewJob(wire_name=wire_name, queue=queue, due_at=due_at, max_attempts=max_attempts, payload=payload)


def enqueue(store: DjangoStore, count: int = 1, *, now: datetime = T0, **fields: Any) -> list[Job]:
    """Enqueue ``count`` identical jobs in one call."""
    return store.enqueue([new_job(**fields) for _ in range(count)], now=now, max_payload_bytes=MAX_PAYLOAD)


def enqueue_one(store: DjangoStore, *, now: datetime = T0, **fields: Any) -> Job:
    return enqueue(store, 1, now=now, **fields)[0]


def claim(
    store: DjangoStore,
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


def claim_one(store: DjangoStore, **kwargs: Any) -> ClaimedJob:
    claimed = claim(store, max_jobs=1, **kwargs)
    assert len(claimed) == 1, f"expected one claimable job, got {claimed}"
    return claimed[0]


def outcome(
    job: ClaimedJob,
    kind: OutcomeKind,
    *,
    attempt: int | None = None,
    retry_at: datetime | None = None,
    message: str = "",
) -> OutcomeReport:
    return OutcomeReport(
        job_id=job.id,
        attempt=job.attempt if attempt is None else attempt,
        kind=kind,
        retry_at=retry_at,
        message=message,
    )


def report(
    store: DjangoStore,
    *reports: OutcomeReport,
    worker: str = WORKER,
    now: datetime = T0,
    details: dict[int, str] | None = None,
) -> ReportResult:
    return store.report(worker_id=worker, reports=list(reports), now=now, details=details)


def as_claimed(job_id: int) -> ClaimedJob:
    """The ClaimedJob a worker holds for a job leased now (by a claim or a factory)."""
    job = Job.objects.select_related("lease").get(id=job_id)
    return ClaimedJob(
        id=job.id,
        wire_name=job.wire_name,
        queue=job.queue,
        payload=job.payload,
        attempt=job.lease.attempt,
        max_attempts=job.max_attempts,
        due_at=job.due_at,
    )


def fresh(job_id: int) -> Job:
    return Job.objects.get(id=job_id)


def state_of(job_id: int) -> str:
    return Job.objects.values_list("state", flat=True).get(id=job_id)


def lease_of(job_id: int) -> Lease | None:
    return Lease.objects.filter(job_id=job_id).first()


def outcomes_of(job_id: int) -> list[Outcome]:
    return list(Outcome.objects.filter(job_id=job_id).order_by("id"))


def audit_rows() -> list[tuple[str, str, str]]:
    """(actor, action, target) of every audit record, oldest first."""
    return list(AuditRecord.objects.order_by("id").values_list("actor", "action", "target"))


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row the store writes, so a test can assert that an operation changed nothing at all."""
    return {
        "jobs": list(Job.objects.order_by("id").values()),
        "leases": list(Lease.objects.order_by("job_id").values()),
        "outcomes": list(Outcome.objects.order_by("id").values()),
        "audit": list(AuditRecord.objects.order_by("id").values()),
        "settings": list(QueueSettings.objects.order_by("queue").values()),
    }
