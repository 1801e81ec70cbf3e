"""Claim: due jobs in the requested queues, in (due time, id) and queue order; each claim is an Attempt."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import ClaimedJob
from backwave_django.core.states import TERMINAL_STATES, State
from backwave_django.store.contract import LeaseView

from ..conftest import LEASE, T0
from .support import (
    MAX_PAYLOAD,
    NO_BACKOFF,
    OTHER_WORKER,
    WORKER,
    claim,
    enqueue,
    enqueue_one,
    inspect,
    job,
    job_in_state,
    new_job,
    snapshot,
    state_of,
    sweep,
)


def test_a_claim_leases_a_due_job_and_starts_attempt_one(store):
    new = enqueue_one(
        store, wire_name="tests.add", payload='{"a": 1, "b": 2}', max_attempts=4, timeout=timedelta(seconds=7)
    )
    now = T0 + timedelta(seconds=30)

    claimed = claim(store, now=now, lease=timedelta(seconds=90))

    assert claimed == [
        ClaimedJob(
            id=new.id,
            wire_name="tests.add",
            queue="default",
            payload='{"a": 1, "b": 2}',
            attempt=1,
            max_attempts=4,
            due_at=T0,
            timeout=timedelta(seconds=7),
            created_at=T0,
        )
    ]
    stored = job(store, new.id)
    assert (stored.state, stored.attempt) == (State.LEASED, 1)
    assert store.get_lease(new.id) == LeaseView(
        job_id=new.id,
        queue="default",
        owner=WORKER,
        attempt=1,
        claimed_at=now,
        expires_at=now + timedelta(seconds=90),
    )
    # an Outcome is written when the Attempt ends, not when it starts
    assert store.list_outcomes(new.id) == []


def test_a_claim_takes_only_jobs_that_are_due(store):
    due = enqueue_one(store, due_at=T0)
    enqueue_one(store, due_at=T0 + timedelta(seconds=1))

    assert [c.id for c in claim(store, now=T0)] == [due.id]


def test_a_claim_takes_only_the_requested_queues(store):
    wanted = enqueue_one(store, queue="emails")
    other = enqueue_one(store, queue="reports")

    assert [c.id for c in claim(store, queues=["emails"])] == [wanted.id]
    assert state_of(store, other.id) is State.SCHEDULED


def test_a_claim_returns_jobs_by_due_time_then_enqueue_order(store):
    late = enqueue_one(store, due_at=T0 - timedelta(seconds=1))
    early_a = enqueue_one(store, due_at=T0 - timedelta(seconds=5))
    early_b = enqueue_one(store, due_at=T0 - timedelta(seconds=5))
    middle = enqueue_one(store, due_at=T0 - timedelta(seconds=3))

    assert [c.id for c in claim(store)] == [early_a.id, early_b.id, middle.id, late.id]


def test_a_claim_respects_max_jobs_and_leaves_the_rest_scheduled(store):
    jobs = enqueue(store, 5)

    first = claim(store, max_jobs=2)
    second = claim(store, max_jobs=2, worker=OTHER_WORKER)

    assert [c.id for c in first] == [j.id for j in jobs[:2]]
    assert [c.id for c in second] == [j.id for j in jobs[2:4]]
    assert state_of(store, jobs[4].id) is State.SCHEDULED
    assert [store.get_lease(j.id) is not None for j in jobs] == [True, True, True, True, False]
    assert inspect(store).leased_in("default") == 4


@pytest.mark.parametrize("max_jobs", [0, -1])
def test_a_claim_for_no_jobs_changes_nothing(store, max_jobs):
    enqueue(store, 2)
    before = snapshot(store)
    assert claim(store, max_jobs=max_jobs) == []
    assert snapshot(store) == before


def test_a_claim_of_no_queues_changes_nothing(store):
    enqueue(store, 2)
    before = snapshot(store)
    assert claim(store, queues=[]) == []
    assert snapshot(store) == before


def test_a_claim_on_an_empty_store_returns_nothing(store):
    assert claim(store) == []


def test_a_leased_job_is_not_claimed_again(store):
    new = enqueue_one(store)
    claim(store)
    assert claim(store, worker=OTHER_WORKER, now=T0 + timedelta(seconds=30)) == []
    assert job(store, new.id).attempt == 1


def test_a_claim_never_takes_terminal_jobs(store):
    for state in sorted(TERMINAL_STATES):
        job_in_state(store, state)
    before = snapshot(store)
    assert claim(store, now=T0 + timedelta(hours=1)) == []
    assert snapshot(store) == before


def test_an_expired_but_unswept_lease_is_not_claimable(store):
    enqueue_one(store)
    claim(store)
    assert claim(store, worker=OTHER_WORKER, now=T0 + LEASE * 10) == []


def test_the_earlier_queue_wins_even_when_a_later_queue_has_older_work(store):
    older = enqueue_one(store, queue="low", due_at=T0 - timedelta(hours=1))
    newer = enqueue_one(store, queue="high", due_at=T0)

    assert [c.id for c in claim(store, queues=["high", "low"], max_jobs=1)] == [newer.id]
    assert [c.id for c in claim(store, queues=["high", "low"], max_jobs=1)] == [older.id]


def test_a_claim_fills_from_the_first_queue_then_falls_through_in_order(store):
    high = enqueue(store, 2, queue="high")
    mid = enqueue(store, 2, queue="mid", due_at=T0 - timedelta(minutes=1))
    low = enqueue(store, 2, queue="low", due_at=T0 - timedelta(minutes=2))

    claimed = claim(store, queues=["high", "mid", "low"], max_jobs=5)

    assert [c.id for c in claimed] == [j.id for j in (*high, *mid, low[0])]
    assert [c.queue for c in claimed] == ["high", "high", "mid", "mid", "low"]


def test_an_empty_first_queue_falls_through_to_the_next(store):
    new = enqueue_one(store, queue="low")
    assert [c.id for c in claim(store, queues=["high", "low"])] == [new.id]


def test_each_claim_increments_the_attempt(store, t0):
    new = enqueue_one(store, max_attempts=5)
    for attempt in (1, 2, 3):
        now = t0 + timedelta(minutes=attempt)
        [claimed] = claim(store, now=now)
        assert claimed.attempt == attempt
        assert store.get_lease(new.id).attempt == attempt
        sweep(store, now=now + LEASE, retry=NO_BACKOFF)


def test_enqueued_jobs_keep_the_batch_order_as_the_claim_tiebreak(store):
    news = [new_job(wire_name=f"tests.n{i}") for i in range(6)]
    ids = [e.id for e in store.enqueue(news, now=T0, max_payload_bytes=MAX_PAYLOAD)]
    claimed = claim(store)
    assert [c.id for c in claimed] == ids
    assert [c.wire_name for c in claimed] == [n.wire_name for n in news]
