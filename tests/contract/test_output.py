"""What an Attempt leaves with its outcome: a success's return value (kept only with a success, only under
the fence), a failure's exception class and traceback, and when the Attempt began."""

from __future__ import annotations

from datetime import timedelta

from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import State
from backwave_django.store.contract import OutcomeDetail

from ..conftest import LEASE, T0
from .support import OTHER_WORKER, claim_one, enqueue_one, job, outcome, report, snapshot, sweep

LATER = T0 + timedelta(seconds=5)


def test_a_success_stores_its_return_value_with_the_job(store):
    new = enqueue_one(store)
    leased = claim_one(store, now=T0)

    report(
        store,
        outcome(leased, OutcomeKind.SUCCEEDED),
        now=LATER,
        details={new.id: OutcomeDetail(output='{"a":1}')},
    )

    assert job(store, new.id).output == '{"a":1}'
    assert job(store, new.id).state is State.SUCCEEDED


def test_a_failure_keeps_no_return_value_but_its_exception_class_and_traceback(store):
    new = enqueue_one(store, max_attempts=3)
    leased = claim_one(store, now=T0)
    detail = OutcomeDetail(traceback="Traceback: boom", error_type="myapp.errors.Boom", output='"ignored"')

    report(
        store, outcome(leased, OutcomeKind.FAILED, message="Boom: boom"), now=LATER, details={new.id: detail}
    )

    assert job(store, new.id).output is None
    [ended] = store.list_outcomes(new.id)
    assert (ended.error_type, ended.detail, ended.started_at) == ("myapp.errors.Boom", "Traceback: boom", T0)


def test_a_fenced_off_report_writes_no_return_value(store):
    new = enqueue_one(store)
    leased = claim_one(store, now=T0)
    before = snapshot(store)

    report(
        store,
        outcome(leased, OutcomeKind.SUCCEEDED),
        worker=OTHER_WORKER,
        now=LATER,
        details={new.id: OutcomeDetail(output='"stolen"')},
    )

    assert snapshot(store) == before


def test_a_success_after_a_cancel_request_keeps_its_return_value(store):
    """A success after a cancel request is a success (the table's rule), so its value is kept."""
    new = enqueue_one(store)
    leased = claim_one(store, now=T0)
    store.cancel(new.id, actor="ops", now=T0)

    report(
        store, outcome(leased, OutcomeKind.SUCCEEDED), now=LATER, details={new.id: OutcomeDetail(output="7")}
    )

    assert (job(store, new.id).state, job(store, new.id).output) == (State.SUCCEEDED, "7")


def test_an_expired_attempt_records_when_it_began(store):
    new = enqueue_one(store, max_attempts=3)
    claim_one(store, now=T0 + timedelta(seconds=1))

    sweep(store, now=T0 + timedelta(seconds=1) + LEASE)

    [ended] = store.list_outcomes(new.id)
    assert (ended.kind, ended.started_at, ended.error_type) == (
        OutcomeKind.EXPIRED,
        T0 + timedelta(seconds=1),
        "",
    )
