"""Unique keys: at most one unfinished job of a wire name holds a key. Enqueueing another returns the holder,
marked duplicate, and writes nothing; a finished job frees its key; a retried or re-leased job keeps it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction

from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import State
from backwave_django.store.contract import RequeueResult, StoreError

from ..conftest import LEASE, T0
from .support import (
    MAX_PAYLOAD,
    claim_one,
    enqueue,
    enqueue_one,
    job,
    new_job,
    outcome,
    report,
    snapshot,
    state_of,
    sweep,
)


def test_a_duplicate_returns_the_holder_and_writes_nothing(store):
    held = enqueue_one(store, unique_key="invoice-42")
    before = snapshot(store)

    again = enqueue_one(store, unique_key="invoice-42", payload='{"other": 1}')

    assert again.id == held.id and again.duplicate and not held.duplicate
    assert snapshot(store) == before


def test_keys_are_per_wire_name_and_jobs_without_one_are_never_duplicates(store):
    first = enqueue_one(store, wire_name="tests.a", unique_key="k")
    other_name = enqueue_one(store, wire_name="tests.b", unique_key="k")
    plain = enqueue(store, 2, wire_name="tests.a")

    assert not other_name.duplicate and other_name.id != first.id
    assert [p.duplicate for p in plain] == [False, False]


def test_a_batch_keeps_the_first_job_of_a_key_and_returns_it_for_the_rest_in_order(store):
    news = [
        new_job(unique_key="a"),
        new_job(),
        new_job(unique_key="a"),
        new_job(unique_key="b"),
        new_job(),
    ]

    done = store.enqueue(news, now=T0, max_payload_bytes=MAX_PAYLOAD)

    assert [d.duplicate for d in done] == [False, False, True, False, False]
    assert done[2].id == done[0].id
    assert done[1].id < done[4].id, "plain jobs' ids follow the order given"
    assert done[0].id < done[3].id, "keyed jobs are written in the order of their keys"
    assert job(store, done[3].id).unique_key == "b"


@pytest.mark.parametrize("ending", [OutcomeKind.SUCCEEDED, OutcomeKind.UNROUTABLE])
def test_a_finished_job_frees_its_key(store, ending):
    held = enqueue_one(store, unique_key="k", due_at=T0)
    leased = claim_one(store, now=T0)
    report(store, outcome(leased, ending), now=T0 + timedelta(seconds=1))

    again = enqueue_one(store, unique_key="k", now=T0 + timedelta(seconds=2))

    assert not again.duplicate and again.id != held.id


def test_a_cancelled_pending_job_frees_its_key(store):
    held = enqueue_one(store, unique_key="k")
    store.cancel(held.id, actor="ops", now=T0)

    assert not enqueue_one(store, unique_key="k").duplicate


def test_a_running_job_holds_its_key_and_keeps_it_through_a_retry_and_an_expired_lease(store):
    held = enqueue_one(store, unique_key="k", max_attempts=5)
    leased = claim_one(store, now=T0)
    assert enqueue_one(store, unique_key="k", now=T0).duplicate, "a leased job holds its key"

    report(store, outcome(leased, OutcomeKind.FAILED, message="boom"), now=T0 + timedelta(seconds=1))
    assert state_of(store, held.id) is State.SCHEDULED
    assert enqueue_one(store, unique_key="k", now=T0 + timedelta(seconds=1)).id == held.id

    claim_one(store, now=T0 + timedelta(minutes=5))
    sweep(store, now=T0 + timedelta(minutes=5) + LEASE)  # the worker crashed: its lease lapses
    assert state_of(store, held.id) is State.SCHEDULED
    assert job(store, held.id).unique_key == "k"
    assert enqueue_one(store, unique_key="k", now=T0 + timedelta(hours=1)).id == held.id


def test_a_requeue_is_refused_while_another_unfinished_job_holds_the_key(store):
    dead = enqueue_one(store, unique_key="k", max_attempts=1)
    leased = claim_one(store, now=T0)
    report(store, outcome(leased, OutcomeKind.FAILED, message="boom"), now=T0)
    assert state_of(store, dead.id) is State.DEAD_LETTERED
    holder = enqueue_one(store, unique_key="k", now=T0)
    assert not holder.duplicate

    assert store.requeue(dead.id, actor="ops", now=T0) is RequeueResult.KEY_TAKEN
    assert state_of(store, dead.id) is State.DEAD_LETTERED
    store.cancel(holder.id, actor="ops", now=T0)
    assert store.requeue(dead.id, actor="ops", now=T0) is RequeueResult.REQUEUED


@pytest.mark.parametrize("bad", ["", "x" * 256, "nul\x00", "\udcff", 42])
def test_a_bad_unique_key_is_refused_before_anything_is_written(store, bad):
    before = snapshot(store)
    with pytest.raises(StoreError, match="unique key"):
        enqueue_one(store, unique_key=bad)
    assert snapshot(store) == before


def test_a_rolled_back_enqueue_takes_its_key_with_it(db_store):
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue_one(db_store, unique_key="k")
        raise RuntimeError("the caller rolls back")

    assert not enqueue_one(db_store, unique_key="k").duplicate


def test_a_duplicate_inside_the_callers_transaction_leaves_it_usable(db_store):
    with transaction.atomic():
        first = enqueue_one(db_store, unique_key="k")
        again = enqueue_one(db_store, unique_key="k")
        after = enqueue_one(db_store)

    assert again.duplicate and again.id == first.id
    assert state_of(db_store, after.id) is State.SCHEDULED
