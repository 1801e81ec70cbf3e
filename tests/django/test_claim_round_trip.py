"""PostgreSQL's claim of one queue in one round-trip (store/postgres_claim.py) keeps what the two-statement
claim guaranteed: pause and concurrency limits hold, and the jobs come back in claim order. The path runs only
outside a transaction, so these tests use a transactional database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from backwave_django import pause_queue, resume_queue, set_concurrency_limit
from backwave_django.models import Job, Lease
from backwave_django.store import get_store

from .. import jobs

LEASE = timedelta(seconds=60)


@pytest.fixture(autouse=True)
def _postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("the one-round-trip claim is PostgreSQL's")


def _claim(queue: str, max_jobs: int = 10) -> list[int]:
    now = timezone.now()
    store = get_store()
    claimed = store.claim(worker_id="w1", queues=[queue], max_jobs=max_jobs, lease_duration=LEASE, now=now)
    return [job.id for job in claimed]


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipeline", "one-query"])
def test_a_one_queue_claim_is_one_round_trip_and_leases_in_claim_order(monkeypatch, pipelined):
    """Two prepared statements in one pipeline (the server commits them together at its Sync), or, where libpq
    has no pipelines, one simple query of both: no BEGIN and no COMMIT either way."""
    from psycopg.pq import TransactionStatus

    from backwave_django.store import postgres

    if not pipelined:
        monkeypatch.setattr(postgres, "pipelines", lambda: False)
    low = jobs.add.using(priority=0).enqueue_many([(i, i) for i in range(3)])
    high = jobs.add.using(priority=5).enqueue(a=9, b=9)
    statements = []

    def count(execute, sql, params, many, context):
        statements.append(" ".join(sql.split())[:40])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        ids = _claim("default", max_jobs=3)
    assert len(statements) == (2 if pipelined else 1)
    assert statements[0].startswith("SELECT pg_advisory_xact_lock_shared")
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status == TransactionStatus.IDLE  # nothing left open
    assert ids == [high.id, low[0].id, low[1].id]
    assert set(Lease.objects.values_list("job_id", flat=True)) == set(ids)
    assert set(Job.objects.filter(id__in=ids).values_list("state", "attempt")) == {("leased", 1)}


def test_a_paused_queue_gives_nothing_and_resumed_gives_its_jobs():
    job = jobs.add.enqueue(a=1, b=2)
    pause_queue("default", actor="test")
    assert _claim("default") == []
    resume_queue("default", actor="test")
    assert _claim("default") == [job.id]


def test_a_limited_queue_is_claimed_up_to_its_limit_through_the_row_lock():
    jobs.add.enqueue_many([(i, i) for i in range(5)])
    set_concurrency_limit("default", 2, actor="test")
    assert len(_claim("default")) == 2
    assert _claim("default") == []
    assert Lease.objects.count() == 2


def test_a_one_queue_claim_announces_each_lease_to_job_transitioned():
    from backwave_django.signals import job_transitioned

    job = jobs.add.enqueue(a=1, b=2)
    heard = []

    def receiver(sender, **kwargs):
        heard.append((kwargs["job_id"], kwargs["from_state"], kwargs["to_state"]))

    job_transitioned.connect(receiver, dispatch_uid="tests.round_trip")
    try:
        assert _claim("default") == [job.id]
    finally:
        job_transitioned.disconnect(dispatch_uid="tests.round_trip")
    assert heard == [(job.id, "scheduled", "leased")]
