"""Priority: within a queue, a claim takes higher priorities first, then earlier due times, then the enqueue
order. Across queues the claim's order of queues still comes first."""

from __future__ import annotations

from datetime import timedelta

from ..conftest import T0
from .support import claim, enqueue_one, job


def test_a_claim_takes_higher_priorities_first_then_due_time_then_enqueue_order(store):
    low_early = enqueue_one(store, priority=-5, due_at=T0 - timedelta(hours=1))
    normal_late = enqueue_one(store, due_at=T0 - timedelta(seconds=1))
    normal_early = enqueue_one(store, due_at=T0 - timedelta(minutes=1))
    high = enqueue_one(store, priority=100, due_at=T0)
    high_not_due = enqueue_one(store, priority=100, due_at=T0 + timedelta(seconds=1))
    normal_same_time = enqueue_one(store, due_at=T0 - timedelta(seconds=1))

    claimed = [c.id for c in claim(store, max_jobs=10, now=T0)]

    assert claimed == [high.id, normal_early.id, normal_late.id, normal_same_time.id, low_early.id]
    assert high_not_due.id not in claimed
    assert job(store, high.id).priority == 100


def test_a_partial_claim_takes_the_highest_priorities(store):
    ids = [enqueue_one(store, priority=p).id for p in (0, 3, -2, 3, 1)]

    claimed = [c.id for c in claim(store, max_jobs=2, now=T0)]

    assert claimed == [ids[1], ids[3]]


def test_queue_order_comes_before_priority(store):
    low_first_queue = enqueue_one(store, queue="a", priority=-100)
    high_second_queue = enqueue_one(store, queue="b", priority=100)

    claimed = [c.id for c in claim(store, queues=["a", "b"], max_jobs=1, now=T0)]

    assert claimed == [low_first_queue.id]
    assert high_second_queue.id not in claimed
