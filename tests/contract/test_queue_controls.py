"""Queue controls: pause and resume, concurrency limits, and how claims honour them.

Slot use is derived from the Lease rows of the queue, so a slot frees when an Attempt ends: on an outcome,
on an expiry sweep, or on a release.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import OutcomeKind
from backwave_django.models import AuditRecord, Lease, QueueSettings
from backwave_django.store.contract import StoreError

from ..conftest import LEASE, T0
from ..factories import QueueSettingsFactory
from .support import (
    OTHER_WORKER,
    RETRY,
    WORKER,
    audit_rows,
    claim,
    enqueue,
    enqueue_one,
    outcome,
    report,
    snapshot,
)

pytestmark = pytest.mark.django_db


def leased_in(queue: str) -> int:
    return Lease.objects.filter(queue=queue).count()


# -- pause and resume --------------------------------------------------------------------------------------


def test_a_paused_queue_is_never_claimed(store):
    enqueue(store, 3, queue="emails")
    store.pause_queue("emails", actor="ops", now=T0)

    for minutes in (0, 1, 60):
        assert claim(store, queues=["emails"], now=T0 + timedelta(minutes=minutes)) == []
    assert Lease.objects.count() == 0


def test_resuming_a_queue_makes_its_work_claimable_again(store):
    jobs = enqueue(store, 2, queue="emails")
    store.pause_queue("emails", actor="ops", now=T0)
    assert claim(store, queues=["emails"]) == []

    store.resume_queue("emails", actor="ops", now=T0 + timedelta(seconds=1))

    assert [c.id for c in claim(store, queues=["emails"], now=T0 + timedelta(seconds=1))] == [
        j.id for j in jobs
    ]


def test_a_paused_queue_is_skipped_and_the_claim_falls_through_to_the_next(store):
    enqueue_one(store, queue="high")
    low = enqueue_one(store, queue="low")
    store.pause_queue("high", actor="ops", now=T0)

    assert [c.id for c in claim(store, queues=["high", "low"])] == [low.id]


def test_pausing_a_queue_leaves_its_leased_jobs_running_and_reportable(store):
    job = enqueue_one(store, queue="emails")
    [claimed] = claim(store, queues=["emails"])
    store.pause_queue("emails", actor="ops", now=T0)

    [beat] = store.heartbeat(worker_id=WORKER, job_ids=[job.id], lease_duration=LEASE, now=T0)
    result = report(store, outcome(claimed, OutcomeKind.SUCCEEDED), now=T0 + timedelta(seconds=1))

    assert beat.renewed is True
    assert result.applied == {job.id}


def test_pausing_an_already_paused_queue_keeps_it_paused(store):
    enqueue_one(store)
    store.pause_queue("default", actor="ops", now=T0)
    store.pause_queue("default", actor="ops", now=T0)
    assert claim(store) == []
    assert QueueSettings.objects.get(queue="default").paused is True


def test_a_pause_keeps_the_queues_concurrency_limit_and_a_resume_restores_it(store):
    enqueue(store, 5)
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)
    store.pause_queue("default", actor="ops", now=T0)
    store.resume_queue("default", actor="ops", now=T0)

    assert len(claim(store)) == 2
    assert QueueSettings.objects.get(queue="default").concurrency_limit == 2


def test_pause_resume_and_limit_write_one_audit_record_per_call_even_without_a_change(store):
    store.pause_queue("emails", actor="alice", now=T0)
    store.pause_queue("emails", actor="alice", now=T0)
    store.resume_queue("emails", actor="bob", now=T0)
    store.resume_queue("emails", actor="bob", now=T0)
    store.set_concurrency_limit("emails", 3, actor="carol", now=T0)
    store.set_concurrency_limit("emails", 3, actor="carol", now=T0)
    store.set_concurrency_limit("emails", None, actor="carol", now=T0 + timedelta(seconds=5))

    A = AuditRecord.Action
    assert audit_rows() == [
        ("alice", A.PAUSE_QUEUE, "emails"),
        ("alice", A.PAUSE_QUEUE, "emails"),
        ("bob", A.RESUME_QUEUE, "emails"),
        ("bob", A.RESUME_QUEUE, "emails"),
        ("carol", A.SET_CONCURRENCY_LIMIT, "emails"),
        ("carol", A.SET_CONCURRENCY_LIMIT, "emails"),
        ("carol", A.SET_CONCURRENCY_LIMIT, "emails"),
    ]
    assert AuditRecord.objects.order_by("id").last().recorded_at == T0 + timedelta(seconds=5)
    settings = QueueSettings.objects.get(queue="emails")
    assert (settings.paused, settings.concurrency_limit) == (False, None)


@pytest.mark.parametrize("queue", ["", "q" * 129], ids=["empty", "too-long"])
def test_a_queue_action_on_a_bad_queue_name_is_refused_and_writes_nothing(store, queue):
    for action in (store.pause_queue, store.resume_queue):
        with pytest.raises(StoreError, match="queue name"):
            action(queue, actor="ops", now=T0)
    with pytest.raises(StoreError, match="queue name"):
        store.set_concurrency_limit(queue, 1, actor="ops", now=T0)
    assert snapshot()["audit"] == snapshot()["settings"] == []


# -- concurrency limits ------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [-1, 1.5, "2", True])
def test_an_invalid_concurrency_limit_raises_and_writes_nothing(store, limit):
    with pytest.raises(StoreError, match="concurrency limit"):
        store.set_concurrency_limit("default", limit, actor="ops", now=T0)
    assert not AuditRecord.objects.exists()
    assert not QueueSettings.objects.exists()


def test_a_concurrency_limit_caps_the_jobs_leased_at_once_across_workers(store):
    enqueue(store, 6)
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)

    first = claim(store, max_jobs=10)
    second = claim(store, worker=OTHER_WORKER, max_jobs=10)

    assert (len(first), second) == (2, [])
    assert leased_in("default") == 2


def test_a_concurrency_limit_only_caps_its_own_queue(store):
    enqueue(store, 3, queue="limited")
    enqueue(store, 3, queue="free")
    store.set_concurrency_limit("limited", 1, actor="ops", now=T0)

    claimed = claim(store, queues=["limited", "free"], max_jobs=10)

    assert [c.queue for c in claimed] == ["limited", "free", "free", "free"]


def test_an_outcome_frees_a_concurrency_slot(store):
    enqueue(store, 3)
    store.set_concurrency_limit("default", 1, actor="ops", now=T0)
    [first] = claim(store)
    assert claim(store) == []

    report(store, outcome(first, OutcomeKind.SUCCEEDED), now=T0 + timedelta(seconds=1))

    assert len(claim(store, now=T0 + timedelta(seconds=1))) == 1


def test_an_expiry_sweep_frees_a_concurrency_slot_but_the_expiry_instant_alone_does_not(store):
    enqueue(store, 3)
    store.set_concurrency_limit("default", 1, actor="ops", now=T0)
    claim(store)
    lapsed = T0 + LEASE

    assert claim(store, worker=OTHER_WORKER, now=lapsed) == []  # expired but not swept: still holds the slot
    assert store.expire_leases(queues=["default"], max_jobs=10, retry=RETRY, now=lapsed) == 1
    assert len(claim(store, worker=OTHER_WORKER, now=lapsed)) == 1


def test_a_release_frees_a_concurrency_slot(store):
    enqueue(store, 2)
    store.set_concurrency_limit("default", 1, actor="ops", now=T0)
    [held] = claim(store)

    store.release(worker_id=WORKER, job_ids=[held.id], now=T0 + timedelta(seconds=1))

    assert len(claim(store, worker=OTHER_WORKER, now=T0 + timedelta(seconds=1))) == 1


def test_a_limit_set_mid_life_applies_on_the_next_claim(store):
    enqueue(store, 6)
    running = claim(store, max_jobs=3)
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)

    assert claim(store) == []  # 3 leased already, over the new limit of 2: no new claims
    report(store, *(outcome(c, OutcomeKind.SUCCEEDED) for c in running[:2]), now=T0)
    assert len(claim(store)) == 1  # 1 still leased, so one slot is free
    assert leased_in("default") == 2


def test_raising_a_limit_frees_slots_and_clearing_it_lifts_the_cap(store):
    enqueue(store, 10)
    store.set_concurrency_limit("default", 1, actor="ops", now=T0)
    assert len(claim(store)) == 1

    store.set_concurrency_limit("default", 3, actor="ops", now=T0)
    assert len(claim(store)) == 2

    store.set_concurrency_limit("default", None, actor="ops", now=T0)
    assert len(claim(store)) == 7


def test_a_concurrency_limit_of_zero_blocks_the_queue(store):
    enqueue(store, 2)
    store.set_concurrency_limit("default", 0, actor="ops", now=T0)
    assert claim(store) == []
    assert leased_in("default") == 0


def test_a_limited_queue_still_honours_max_jobs(store):
    enqueue(store, 5)
    QueueSettingsFactory(queue="default", concurrency_limit=4)
    assert len(claim(store, max_jobs=3)) == 3
    assert len(claim(store, max_jobs=3)) == 1


def test_a_paused_and_limited_queue_is_not_claimed(store):
    enqueue(store, 2)
    QueueSettingsFactory(queue="default", concurrency_limit=5, paused=True)
    assert claim(store) == []
