"""Reads the Pump relies on: when work is next due, and how much is still live."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import State

from ..conftest import T0
from ..factories import JobFactory
from .support import claim, claim_one, enqueue, enqueue_one, outcome, report

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


# -- next_due ----------------------------------------------------------------------------------------------


def test_next_due_on_an_empty_store_is_none(store):
    assert store.next_due(["default"], now=T0) is None


def test_next_due_is_the_earliest_future_due_time(store):
    enqueue_one(store, due_at=T0 + 2 * HOUR)
    enqueue_one(store, due_at=T0 + HOUR)
    assert store.next_due(["default"], now=T0) == T0 + HOUR


def test_next_due_is_now_when_work_is_already_due(store):
    enqueue_one(store, due_at=T0 - HOUR)
    enqueue_one(store, due_at=T0 + HOUR)
    assert store.next_due(["default"], now=T0) == T0


def test_next_due_after_claiming_the_due_work_is_the_next_future_job(store):
    enqueue_one(store, due_at=T0)
    enqueue_one(store, due_at=T0 + HOUR)
    claim(store)
    assert store.next_due(["default"], now=T0) == T0 + HOUR


def test_next_due_looks_only_at_the_given_queues(store):
    enqueue_one(store, queue="other", due_at=T0)
    enqueue_one(store, queue="mine", due_at=T0 + HOUR)
    assert store.next_due(["mine"], now=T0) == T0 + HOUR
    assert store.next_due(["mine", "other"], now=T0) == T0


def test_next_due_ignores_paused_queues(store):
    enqueue_one(store, queue="paused", due_at=T0)
    enqueue_one(store, queue="open", due_at=T0 + HOUR)
    store.pause_queue("paused", actor="ops", now=T0)

    assert store.next_due(["paused"], now=T0) is None
    assert store.next_due(["paused", "open"], now=T0) == T0 + HOUR


def test_next_due_ignores_leased_and_terminal_jobs(store):
    enqueue_one(store, due_at=T0)
    claim(store)
    for state in (State.SUCCEEDED, State.DEAD_LETTERED):
        JobFactory(state=state, due_at=T0 - HOUR, terminal_at=T0)
    assert store.next_due(["default"], now=T0) is None


def test_next_due_sees_a_retry_time(store):
    enqueue_one(store)
    claimed = claim_one(store)
    report(store, outcome(claimed, OutcomeKind.FAILED, retry_at=T0 + HOUR), now=T0)
    assert store.next_due(["default"], now=T0) == T0 + HOUR


# -- count_live --------------------------------------------------------------------------------------------


def test_count_live_counts_scheduled_and_leased_jobs_in_the_given_queues(store):
    enqueue(store, 2, queue="a")
    enqueue(store, 1, queue="a", due_at=T0 + HOUR)
    enqueue(store, 4, queue="b")
    claim(store, queues=["a"], max_jobs=1)

    assert store.count_live(["a"]) == 3
    assert store.count_live(["a", "b"]) == 7
    assert store.count_live(["c"]) == 0
    assert store.count_live([]) == 0


def test_count_live_excludes_terminal_jobs(store):
    done, dead, _live = enqueue(store, 3)
    a, b = claim(store, max_jobs=2)
    report(store, outcome(a, OutcomeKind.SUCCEEDED), outcome(b, OutcomeKind.FAILED), now=T0)
    assert store.count_live(["default"]) == 1
    store.cancel(_live.id, actor="ops", now=T0)
    assert store.count_live(["default"]) == 0
    assert {done.id, dead.id} == {a.id, b.id}
