"""Queue controls: pause and resume, concurrency limits, and how claims honour them.

Slot use is counted from the queue's leases, so a slot frees when an Attempt ends: on an outcome, on an
expiry sweep, or on a release (a RELEASED report). Bad queue names and limits: ``test_bounds.py``.
"""

from __future__ import annotations

from datetime import timedelta

from backwave_django.core.records import OutcomeKind
from backwave_django.store.contract import QueueView

from ..conftest import LEASE, T0
from .support import (
    OTHER_WORKER,
    WORKER,
    audit_rows,
    beat,
    claim,
    enqueue,
    enqueue_one,
    inspect,
    outcome,
    report,
    sweep,
)


def leased_in(store, queue: str) -> int:
    return inspect(store).leased_in(queue)


def settings_of(store, queue: str) -> QueueView:
    [found] = [q for q in store.list_queues() if q.queue == queue]
    return found


# -- pause and resume --------------------------------------------------------------------------------------


def test_a_paused_queue_is_never_claimed(store):
    enqueue(store, 3, queue="emails")
    store.pause_queue("emails", actor="ops", now=T0)

    for minutes in (0, 1, 60):
        assert claim(store, queues=["emails"], now=T0 + timedelta(minutes=minutes)) == []
    assert leased_in(store, "emails") == 0


def test_queue_names_that_differ_only_in_case_are_different_queues(store):
    """MariaDB's default collations would make them one queue: its tables compare text byte for byte."""
    upper = enqueue(store, 2, queue="Emails")
    lower = enqueue(store, 2, queue="emails")
    store.pause_queue("Emails", actor="ops", now=T0)
    store.set_concurrency_limit("emails", 1, actor="ops", now=T0)

    assert [c.id for c in claim(store, queues=["emails"])] == [lower[0].id]
    assert claim(store, queues=["Emails"]) == []
    assert [(q.queue, q.paused, q.concurrency_limit) for q in store.list_queues()] == [
        ("Emails", True, None),
        ("emails", False, 1),
    ]
    store.resume_queue("Emails", actor="ops", now=T0)
    assert [c.id for c in claim(store, queues=["Emails"])] == [j.id for j in upper]


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
    new = enqueue_one(store, queue="emails")
    [claimed] = claim(store, queues=["emails"])
    store.pause_queue("emails", actor="ops", now=T0)

    [renewed] = beat(store, [new.id], now=T0)
    result = report(store, outcome(claimed, OutcomeKind.SUCCEEDED), now=T0 + timedelta(seconds=1))

    assert renewed.renewed is True
    assert result.applied == {new.id}


def test_pausing_an_already_paused_queue_keeps_it_paused(store):
    enqueue_one(store)
    store.pause_queue("default", actor="ops", now=T0)
    store.pause_queue("default", actor="ops", now=T0)
    assert claim(store) == []
    assert settings_of(store, "default").paused is True


def test_a_pause_keeps_the_queues_concurrency_limit_and_a_resume_restores_it(store):
    enqueue(store, 5)
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)
    store.pause_queue("default", actor="ops", now=T0)
    store.resume_queue("default", actor="ops", now=T0)

    assert len(claim(store)) == 2
    assert settings_of(store, "default") == QueueView(queue="default", paused=False, concurrency_limit=2)


def test_pause_resume_and_limit_write_one_audit_record_per_call_even_without_a_change(store):
    store.pause_queue("emails", actor="alice", now=T0)
    store.pause_queue("emails", actor="alice", now=T0)
    store.resume_queue("emails", actor="bob", now=T0)
    store.resume_queue("emails", actor="bob", now=T0)
    store.set_concurrency_limit("emails", 3, actor="carol", now=T0)
    store.set_concurrency_limit("emails", 3, actor="carol", now=T0)
    store.set_concurrency_limit("emails", None, actor="carol", now=T0 + timedelta(seconds=5))

    assert audit_rows(store) == [
        ("alice", "pause_queue", "emails"),
        ("alice", "pause_queue", "emails"),
        ("bob", "resume_queue", "emails"),
        ("bob", "resume_queue", "emails"),
        ("carol", "set_concurrency_limit", "emails"),
        ("carol", "set_concurrency_limit", "emails"),
        ("carol", "set_concurrency_limit", "emails"),
    ]
    last = store.list_audit()[-1]
    assert (last.recorded_at, last.detail) == (T0 + timedelta(seconds=5), "concurrency_limit=None")
    assert settings_of(store, "emails") == QueueView(queue="emails", paused=False, concurrency_limit=None)


# -- concurrency limits ------------------------------------------------------------------------------------


def test_a_concurrency_limit_caps_the_jobs_leased_at_once_across_workers(store):
    enqueue(store, 6)
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)

    first = claim(store, max_jobs=10)
    second = claim(store, worker=OTHER_WORKER, max_jobs=10)

    assert (len(first), second) == (2, [])
    assert leased_in(store, "default") == 2


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
    assert sweep(store, now=lapsed) == 1
    assert len(claim(store, worker=OTHER_WORKER, now=lapsed)) == 1


def test_a_release_frees_a_concurrency_slot(store):
    enqueue(store, 2)
    store.set_concurrency_limit("default", 1, actor="ops", now=T0)
    [held] = claim(store)

    report(store, outcome(held, OutcomeKind.RELEASED), worker=WORKER, now=T0 + timedelta(seconds=1))

    assert len(claim(store, worker=OTHER_WORKER, now=T0 + timedelta(seconds=1))) == 1


def test_a_limit_set_mid_life_applies_on_the_next_claim(store):
    enqueue(store, 6)
    running = claim(store, max_jobs=3)
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)

    assert claim(store) == []  # 3 leased already, over the new limit of 2: no new claims
    report(store, *(outcome(c, OutcomeKind.SUCCEEDED) for c in running[:2]), now=T0)
    assert len(claim(store)) == 1  # 1 still leased, so one slot is free
    assert leased_in(store, "default") == 2


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
    assert leased_in(store, "default") == 0


def test_a_limited_queue_still_honours_max_jobs(store):
    enqueue(store, 5)
    store.set_concurrency_limit("default", 4, actor="ops", now=T0)
    assert len(claim(store, max_jobs=3)) == 3
    assert len(claim(store, max_jobs=3)) == 1


def test_a_paused_and_limited_queue_is_not_claimed(store):
    enqueue(store, 2)
    store.set_concurrency_limit("default", 5, actor="ops", now=T0)
    store.pause_queue("default", actor="ops", now=T0)
    assert claim(store) == []
