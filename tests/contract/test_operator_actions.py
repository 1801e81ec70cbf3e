"""Operator cancel and requeue: each accepted action writes one audit record; a refused one writes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import TERMINAL_STATES, State
from backwave_django.store.contract import CancelResult, RequeueResult

from ..conftest import LEASE, T0
from .support import (
    UNKNOWN_ID,
    WORKER,
    audit_rows,
    claim,
    claim_one,
    enqueue_one,
    job,
    job_in_state,
    outcome,
    report,
    snapshot,
    state_of,
    sweep,
)

LATER = T0 + timedelta(minutes=3)


# -- cancel ------------------------------------------------------------------------------------------------


def test_cancelling_a_scheduled_job_cancels_it_at_once_with_an_audit_record(store):
    new = enqueue_one(store, due_at=T0 + timedelta(hours=1))

    assert store.cancel(new.id, actor="alice", now=LATER) is CancelResult.CANCELLED

    stored = job(store, new.id)
    assert (stored.state, stored.terminal_at, stored.terminal_cause) == (
        State.CANCELLED,
        LATER,
        "cancelled by alice",
    )
    assert audit_rows(store) == [("alice", "cancel", str(new.id))]
    [record] = store.list_audit()
    assert (record.recorded_at, record.detail) == (LATER, "cancelled")
    assert store.list_outcomes(new.id) == []  # no Attempt ended
    assert claim(store, now=T0 + timedelta(hours=2)) == []


def test_cancelling_a_leased_job_only_requests_it_and_keeps_the_lease(store):
    new = enqueue_one(store)
    claimed = claim_one(store)
    lease = store.get_lease(new.id)

    assert store.cancel(new.id, actor="alice", now=LATER - LEASE) is CancelResult.REQUESTED

    stored = job(store, new.id)
    assert (stored.state, stored.cancel_requested, stored.attempt) == (State.LEASED, True, 1)
    assert store.get_lease(new.id) == lease
    assert lease.attempt == claimed.attempt
    assert audit_rows(store) == [("alice", "cancel", str(new.id))]
    assert store.list_audit()[0].detail == "requested"


def test_a_requested_cancel_completes_when_the_attempt_fails(store):
    new = enqueue_one(store)
    claimed = claim_one(store)
    store.cancel(new.id, actor="alice", now=T0)

    report(store, outcome(claimed, OutcomeKind.FAILED), now=T0 + timedelta(seconds=5))

    assert state_of(store, new.id) is State.CANCELLED
    assert claim(store, now=LATER) == []


def test_a_requested_cancel_completes_when_the_lease_expires(store):
    new = enqueue_one(store)
    claim(store)
    store.cancel(new.id, actor="alice", now=T0)

    sweep(store, now=T0 + LEASE)

    assert state_of(store, new.id) is State.CANCELLED


def test_cancelling_a_leased_job_twice_requests_it_twice(store):
    new = enqueue_one(store)
    claim(store)
    assert store.cancel(new.id, actor="alice", now=T0) is CancelResult.REQUESTED
    assert store.cancel(new.id, actor="bob", now=T0) is CancelResult.REQUESTED
    assert [actor for actor, _, _ in audit_rows(store)] == ["alice", "bob"]


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_cancelling_a_terminal_job_is_refused_and_changes_nothing(store, state):
    job_id = job_in_state(store, state)
    before = snapshot(store)

    assert store.cancel(job_id, actor="alice", now=LATER) is CancelResult.NOT_CANCELLABLE
    assert snapshot(store) == before


def test_cancelling_an_unknown_job_is_refused_without_an_audit_record(store):
    before = snapshot(store)
    assert store.cancel(UNKNOWN_ID, actor="alice", now=LATER) is CancelResult.NOT_CANCELLABLE
    assert snapshot(store) == before


def test_cancelling_a_cancelled_job_again_is_refused(store):
    new = enqueue_one(store)
    store.cancel(new.id, actor="alice", now=T0)
    assert store.cancel(new.id, actor="bob", now=LATER) is CancelResult.NOT_CANCELLABLE
    assert [actor for actor, _, _ in audit_rows(store)] == ["alice"]
    assert job(store, new.id).terminal_at == T0


# -- requeue -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [State.DEAD_LETTERED, State.QUARANTINED])
def test_requeue_reschedules_a_failed_job_due_now_at_attempt_zero(store, state):
    job_id = job_in_state(store, state)

    assert store.requeue(job_id, actor="bob", now=LATER) is RequeueResult.REQUEUED

    stored = job(store, job_id)
    assert (stored.state, stored.attempt, stored.due_at) == (State.SCHEDULED, 0, LATER)
    assert (stored.terminal_at, stored.terminal_cause, stored.cancel_requested) == (None, "", False)
    assert audit_rows(store) == [("bob", "requeue", str(job_id))]
    assert store.list_audit()[0].recorded_at == LATER
    assert len(store.list_outcomes(job_id)) == 1  # the history stays
    assert claim_one(store, now=LATER).attempt == 1


def test_a_requeued_job_gets_its_full_attempt_budget_again(store):
    new = enqueue_one(store, max_attempts=1)
    claimed = claim_one(store)
    report(store, outcome(claimed, OutcomeKind.FAILED, message="no"), now=T0)
    assert state_of(store, new.id) is State.DEAD_LETTERED

    store.requeue(new.id, actor="bob", now=LATER)
    again = claim_one(store, now=LATER)
    report(store, outcome(again, OutcomeKind.SUCCEEDED), now=LATER, worker=WORKER)

    assert (again.attempt, state_of(store, new.id)) == (1, State.SUCCEEDED)


@pytest.mark.parametrize("state", [State.SUCCEEDED, State.CANCELLED])
def test_requeue_of_a_succeeded_or_cancelled_job_is_refused_and_changes_nothing(store, state):
    job_id = job_in_state(store, state)
    before = snapshot(store)
    assert store.requeue(job_id, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert snapshot(store) == before


def test_requeue_of_a_live_job_is_refused_and_changes_nothing(store):
    leased = job_in_state(store, State.LEASED)
    scheduled = enqueue_one(store, due_at=T0 + timedelta(hours=1))
    before = snapshot(store)

    assert store.requeue(scheduled.id, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert store.requeue(leased, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert snapshot(store) == before


def test_requeue_of_an_unknown_job_is_refused_without_an_audit_record(store):
    before = snapshot(store)
    assert store.requeue(UNKNOWN_ID, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert snapshot(store) == before
