"""An illegal move raises StoreError and writes nothing (the contract's rule 5).

Every state change a store makes is decided by ``core.transitions`` and checked against
``core.states.TRANSITIONS``. These tests make a table name a move the legal transitions forbid (as a bug in a
table would), or corrupt a job behind the store's back (as only a bug could), and check that each store
refuses the whole operation with :class:`StoreError` and leaves everything as it was.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core import states, transitions
from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import State
from backwave_django.store.contract import StoreError

from ..conftest import LEASE, T0
from .support import claim, enqueue, enqueue_one, inspect, job_in_state, outcome, report, snapshot, sweep

SOON = T0 + timedelta(seconds=5)
#: A rule no leased job may follow: back to waiting for a parent.
NOWHERE = transitions.Rule(State.AWAITING_PARENT, "a move no table may make")


def refused(store, action) -> StoreError:
    before = snapshot(store)
    with pytest.raises(StoreError) as raised:
        action()
    assert snapshot(store) == before, "an illegal move wrote something"
    return raised.value


def test_a_report_whose_row_names_an_illegal_move_is_refused_whole(store, monkeypatch):
    enqueue(store, 2)
    fine, bad = claim(store)
    monkeypatch.setitem(transitions.LEASE_ENDINGS, (OutcomeKind.UNROUTABLE, True, False), NOWHERE)

    error = refused(
        store,
        lambda: report(
            store, outcome(fine, OutcomeKind.SUCCEEDED), outcome(bad, OutcomeKind.UNROUTABLE), now=SOON
        ),
    )

    assert "awaiting_parent" in str(error)


def test_a_sweep_whose_row_names_an_illegal_move_is_refused_whole(store, monkeypatch):
    enqueue(store, 2)
    claim(store)
    monkeypatch.setitem(transitions.LEASE_ENDINGS, (OutcomeKind.EXPIRED, True, False), NOWHERE)

    refused(store, lambda: sweep(store, now=T0 + LEASE))


def test_a_cancel_the_legal_transitions_forbid_is_refused(store, monkeypatch):
    job_id = job_in_state(store, State.SUCCEEDED)
    monkeypatch.setitem(transitions.CANCELS, State.SUCCEEDED, transitions.CancelEffect.CANCEL)

    refused(store, lambda: store.cancel(job_id, actor="ops", now=SOON))


def test_a_requeue_the_legal_transitions_forbid_is_refused(store, monkeypatch):
    job_id = job_in_state(store, State.SUCCEEDED)
    monkeypatch.setattr(transitions, "REQUEUES", transitions.REQUEUES | {State.SUCCEEDED})

    refused(store, lambda: store.requeue(job_id, actor="ops", now=SOON))


def test_a_claim_the_legal_transitions_forbid_is_refused(store, monkeypatch):
    enqueue(store, 3)
    store.set_concurrency_limit("limited", 5, actor="ops", now=T0)
    enqueue_one(store, queue="limited")
    monkeypatch.delitem(states.TRANSITIONS, (State.SCHEDULED, State.LEASED))

    refused(store, lambda: claim(store))
    refused(store, lambda: claim(store, queues=["limited"]))


def test_a_report_on_a_lease_whose_job_is_no_longer_leased_is_refused_whole(store):
    enqueue(store, 2)
    fine, corrupted = claim(store)
    inspect(store).corrupt_state(corrupted.id, State.SUCCEEDED)

    error = refused(
        store,
        lambda: report(
            store, outcome(fine, OutcomeKind.SUCCEEDED), outcome(corrupted, OutcomeKind.FAILED), now=SOON
        ),
    )

    assert "lost" in str(error)


def test_a_sweep_of_a_lease_whose_job_is_no_longer_leased_is_refused_whole(store):
    enqueue(store, 2)
    _, corrupted = claim(store)
    inspect(store).corrupt_state(corrupted.id, State.SUCCEEDED)

    refused(store, lambda: sweep(store, now=T0 + LEASE))


def test_a_claim_leases_only_claimable_jobs_even_when_its_pick_is_wrong(db_store, monkeypatch):
    # The WHERE clause of the claim's move is the guard: a pick that found a finished job (a bug in the
    # query) moves nothing, and the store refuses the claim rather than lease the rest around it.
    from backwave_django.models import JobQuerySet

    db_store.set_concurrency_limit("limited", 5, actor="ops", now=T0)  # the ORM path on every database store
    job_in_state(db_store, State.SUCCEEDED, queue="limited")
    enqueue_one(db_store, queue="limited")

    def any_state(self, queues, now):
        return self.filter(queue__in=queues).order_by("id")

    monkeypatch.setattr(JobQuerySet, "claimable", any_state)

    error = refused(db_store, lambda: claim(db_store, queues=["limited"]))

    assert "left scheduled while being claimed" in str(error)
