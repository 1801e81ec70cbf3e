"""Operator cancel and requeue: each accepted action writes one AuditRecord; a refused one writes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import TERMINAL_STATES, State
from backwave_django.models import AuditRecord
from backwave_django.store.contract import CancelResult, RequeueResult

from ..conftest import LEASE, T0
from ..factories import JobFactory
from .support import (
    RETRY,
    WORKER,
    audit_rows,
    claim,
    claim_one,
    enqueue_one,
    fresh,
    lease_of,
    outcome,
    report,
    snapshot,
)

pytestmark = pytest.mark.django_db

LATER = T0 + timedelta(minutes=3)
A = AuditRecord.Action


def terminal_job(state: State, **fields):
    return JobFactory(
        state=state,
        attempt=3,
        terminal_at=T0,
        terminal_cause=f"was {state}",
        due_at=T0 - timedelta(hours=1),
        **fields,
    )


# -- cancel ------------------------------------------------------------------------------------------------


def test_cancelling_a_scheduled_job_cancels_it_at_once_with_an_audit_record(store):
    job = enqueue_one(store, due_at=T0 + timedelta(hours=1))

    assert store.cancel(job.id, actor="alice", now=LATER) is CancelResult.CANCELLED

    stored = fresh(job.id)
    assert (State(stored.state), stored.terminal_at) == (State.CANCELLED, LATER)
    assert "alice" in stored.terminal_cause
    assert audit_rows() == [("alice", A.CANCEL, str(job.id))]
    assert AuditRecord.objects.get().recorded_at == LATER
    assert claim(store, now=T0 + timedelta(hours=2)) == []


def test_cancelling_a_leased_job_only_requests_it_and_keeps_the_lease(store):
    job = enqueue_one(store)
    claimed = claim_one(store)

    assert store.cancel(job.id, actor="alice", now=LATER - LEASE) is CancelResult.REQUESTED

    stored = fresh(job.id)
    assert (State(stored.state), stored.cancel_requested, stored.attempt) == (State.LEASED, True, 1)
    assert lease_of(job.id).attempt == claimed.attempt
    assert audit_rows() == [("alice", A.CANCEL, str(job.id))]


def test_a_requested_cancel_completes_when_the_attempt_fails(store):
    job = enqueue_one(store)
    claimed = claim_one(store)
    store.cancel(job.id, actor="alice", now=T0)

    report(store, outcome(claimed, OutcomeKind.FAILED, retry_at=LATER), now=T0 + timedelta(seconds=5))

    assert State(fresh(job.id).state) is State.CANCELLED
    assert claim(store, now=LATER) == []


def test_a_requested_cancel_completes_when_the_lease_expires(store):
    job = enqueue_one(store)
    claim(store)
    store.cancel(job.id, actor="alice", now=T0)

    store.expire_leases(queues=["default"], max_jobs=10, retry=RETRY, now=T0 + LEASE)

    assert State(fresh(job.id).state) is State.CANCELLED


def test_cancelling_a_leased_job_twice_requests_it_twice(store):
    job = enqueue_one(store)
    claim(store)
    assert store.cancel(job.id, actor="alice", now=T0) is CancelResult.REQUESTED
    assert store.cancel(job.id, actor="bob", now=T0) is CancelResult.REQUESTED
    assert [actor for actor, _, _ in audit_rows()] == ["alice", "bob"]


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_cancelling_a_terminal_job_is_refused_and_changes_nothing(store, state):
    job = terminal_job(state)
    before = snapshot()

    assert store.cancel(job.id, actor="alice", now=LATER) is CancelResult.NOT_CANCELLABLE
    assert snapshot() == before


def test_cancelling_an_unknown_job_is_refused_without_an_audit_record(store):
    assert store.cancel(10**9, actor="alice", now=LATER) is CancelResult.NOT_CANCELLABLE
    assert audit_rows() == []


def test_cancelling_a_cancelled_job_again_is_refused(store):
    job = enqueue_one(store)
    store.cancel(job.id, actor="alice", now=T0)
    assert store.cancel(job.id, actor="bob", now=LATER) is CancelResult.NOT_CANCELLABLE
    assert [actor for actor, _, _ in audit_rows()] == ["alice"]
    assert fresh(job.id).terminal_at == T0


# -- requeue -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [State.DEAD_LETTERED, State.QUARANTINED])
def test_requeue_reschedules_a_failed_job_due_now_at_attempt_zero(store, state):
    job = terminal_job(state, cancel_requested=True)

    assert store.requeue(job.id, actor="bob", now=LATER) is RequeueResult.REQUEUED

    stored = fresh(job.id)
    assert (State(stored.state), stored.attempt, stored.due_at) == (State.SCHEDULED, 0, LATER)
    assert (stored.terminal_at, stored.terminal_cause, stored.cancel_requested) == (None, "", False)
    assert audit_rows() == [("bob", A.REQUEUE, str(job.id))]
    assert AuditRecord.objects.get().recorded_at == LATER
    assert claim_one(store, now=LATER).attempt == 1


def test_a_requeued_job_gets_its_full_attempt_budget_again(store):
    job = enqueue_one(store, max_attempts=1)
    claimed = claim_one(store)
    report(store, outcome(claimed, OutcomeKind.FAILED, message="no"), now=T0)
    assert State(fresh(job.id).state) is State.DEAD_LETTERED

    store.requeue(job.id, actor="bob", now=LATER)
    again = claim_one(store, now=LATER)
    report(store, outcome(again, OutcomeKind.SUCCEEDED), now=LATER, worker=WORKER)

    assert (again.attempt, State(fresh(job.id).state)) == (1, State.SUCCEEDED)


@pytest.mark.parametrize("state", [State.SUCCEEDED, State.CANCELLED])
def test_requeue_of_a_succeeded_or_cancelled_job_is_refused_and_changes_nothing(store, state):
    job = terminal_job(state)
    before = snapshot()
    assert store.requeue(job.id, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert snapshot() == before


def test_requeue_of_a_live_job_is_refused_and_changes_nothing(store):
    scheduled = enqueue_one(store, due_at=T0 + timedelta(hours=1))
    leased = enqueue_one(store)
    claim(store)
    before = snapshot()

    assert store.requeue(scheduled.id, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert store.requeue(leased.id, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert snapshot() == before


def test_requeue_of_an_unknown_job_is_refused_without_an_audit_record(store):
    assert store.requeue(10**9, actor="bob", now=LATER) is RequeueResult.NOT_REQUEUEABLE
    assert audit_rows() == []
