"""Outcome reports: fenced by the Lease's (owner, attempt) and ``expires_at > now``; one Outcome each."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.core.states import TRANSITIONS, State
from backwave_django.models import Lease, Outcome
from backwave_django.store.contract import MAX_DETAIL_BYTES, StoreError

from ..conftest import LEASE, T0
from .support import (
    OTHER_WORKER,
    RETRY,
    WORKER,
    claim,
    claim_one,
    enqueue,
    enqueue_one,
    fresh,
    lease_of,
    outcome,
    outcomes_of,
    report,
    snapshot,
)

pytestmark = pytest.mark.django_db

SOON = T0 + timedelta(seconds=10)


@pytest.fixture
def leased(store):
    """One job claimed by WORKER at T0 (attempt 1, lease until T0 + LEASE)."""
    enqueue_one(store, max_attempts=3)
    return claim_one(store)


def test_a_success_makes_the_job_succeeded_and_ends_its_lease(store, leased):
    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED, message="ok"), now=SOON)

    assert (result.applied, result.stale) == ({leased.id}, frozenset())
    job = fresh(leased.id)
    assert (State(job.state), job.attempt, job.terminal_at) == (State.SUCCEEDED, 1, SOON)
    assert lease_of(leased.id) is None
    [row] = outcomes_of(leased.id)
    assert (row.attempt, row.worker, row.kind, row.state_after) == (1, WORKER, "succeeded", "succeeded")
    assert row.recorded_at == SOON


def test_a_failure_with_a_retry_time_reschedules_the_job_at_that_instant(store, leased):
    retry_at = SOON + timedelta(minutes=5)

    report(store, outcome(leased, OutcomeKind.FAILED, retry_at=retry_at, message="boom"), now=SOON)

    job = fresh(leased.id)
    assert (State(job.state), job.due_at, job.attempt) == (State.SCHEDULED, retry_at, 1)
    assert (job.terminal_at, job.terminal_cause) == (None, "")
    assert lease_of(leased.id) is None
    [row] = outcomes_of(leased.id)
    assert (row.kind, row.state_after, row.message) == ("failed", "scheduled", "boom")
    assert claim(store, now=retry_at - timedelta(microseconds=1)) == []
    assert claim_one(store, now=retry_at).attempt == 2


def test_a_failure_without_a_retry_time_dead_letters_with_the_message_as_cause(store, leased):
    report(store, outcome(leased, OutcomeKind.FAILED, message="ValueError: bad input"), now=SOON)

    job = fresh(leased.id)
    assert State(job.state) is State.DEAD_LETTERED
    assert (job.terminal_at, job.terminal_cause) == (SOON, "ValueError: bad input")
    assert lease_of(leased.id) is None
    [row] = outcomes_of(leased.id)
    assert (row.kind, row.state_after) == ("failed", "dead_lettered")


def test_a_cancelled_outcome_cancels_the_job_and_clears_the_request(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)

    report(store, outcome(leased, OutcomeKind.CANCELLED), now=SOON)

    job = fresh(leased.id)
    assert (State(job.state), job.terminal_at, job.cancel_requested) == (State.CANCELLED, SOON, False)
    assert job.terminal_cause == "operator-cancel"
    [row] = outcomes_of(leased.id)
    assert (row.kind, row.state_after) == ("cancelled", "cancelled")


def test_an_unroutable_outcome_quarantines_the_job_with_its_reason(store, leased):
    reason = "no handler registered for 'tests.noop'"

    report(store, outcome(leased, OutcomeKind.UNROUTABLE, message=reason), now=SOON)

    job = fresh(leased.id)
    assert (State(job.state), job.terminal_at, job.terminal_cause) == (State.QUARANTINED, SOON, reason)
    [row] = outcomes_of(leased.id)
    assert (row.kind, row.state_after, row.message) == ("unroutable", "quarantined", reason)


@pytest.mark.parametrize("kind", [OutcomeKind.EXPIRED, OutcomeKind.RELEASED])
def test_a_worker_cannot_report_the_store_only_kinds_and_nothing_changes(store, leased, kind):
    before = snapshot()
    with pytest.raises(StoreError, match="cannot report"):
        report(store, outcome(leased, kind), now=SOON)
    assert snapshot() == before


def test_every_applied_outcome_follows_a_legal_transition(store):
    enqueue(store, 5)
    claimed = claim(store)
    kinds = [OutcomeKind.SUCCEEDED, OutcomeKind.FAILED, OutcomeKind.FAILED, OutcomeKind.UNROUTABLE]
    reports = [
        outcome(claimed[0], kinds[0]),
        outcome(claimed[1], kinds[1], retry_at=SOON),
        outcome(claimed[2], kinds[2]),
        outcome(claimed[3], kinds[3]),
    ]
    store.cancel(claimed[4].id, actor="ops", now=T0)
    reports.append(outcome(claimed[4], OutcomeKind.CANCELLED))

    report(store, *reports, now=SOON)

    for row in Outcome.objects.all():
        assert (State.LEASED, State(row.state_after)) in TRANSITIONS
        assert State(fresh(row.job_id).state) is State(row.state_after)


# -- the fence ---------------------------------------------------------------------------------------------


def test_a_stale_worker_outcome_changes_nothing(store, leased):
    before = snapshot()

    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), worker=OTHER_WORKER, now=SOON)

    assert (result.applied, result.stale) == (frozenset(), {leased.id})
    assert snapshot() == before


@pytest.mark.parametrize("attempt", [0, 2])
def test_an_outcome_for_another_attempt_changes_nothing(store, leased, attempt):
    before = snapshot()

    result = report(store, outcome(leased, OutcomeKind.FAILED, attempt=attempt), now=SOON)

    assert result.stale == {leased.id}
    assert snapshot() == before


def test_an_outcome_at_the_lease_expiry_instant_is_stale(store, leased):
    before = snapshot()

    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=T0 + LEASE)

    assert result.stale == {leased.id}
    assert snapshot() == before


def test_an_outcome_just_before_the_lease_expiry_instant_applies(store, leased):
    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=T0 + LEASE - timedelta(microseconds=1))
    assert result.applied == {leased.id}


def test_an_outcome_after_the_lease_expired_changes_nothing_even_before_the_sweep(store, leased):
    before = snapshot()
    result = report(store, outcome(leased, OutcomeKind.FAILED, retry_at=SOON), now=T0 + LEASE * 2)
    assert result.stale == {leased.id}
    assert snapshot() == before


def test_an_already_reported_outcome_is_stale_the_second_time(store, leased):
    report(store, outcome(leased, OutcomeKind.FAILED, retry_at=SOON), now=SOON)
    before = snapshot()

    again = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=SOON)

    assert again.stale == {leased.id}
    assert snapshot() == before


def test_a_previous_attempts_worker_cannot_report_over_the_next_attempt(store, leased):
    """A worker whose lease was swept comes back: the job's next Attempt belongs to someone else."""
    store.expire_leases(queues=["default"], max_jobs=10, retry=RETRY, now=T0 + LEASE)
    later = T0 + LEASE + timedelta(minutes=5)
    second = claim_one(store, worker=OTHER_WORKER, now=later)
    before = snapshot()

    stale = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=later)
    wrong_attempt = report(
        store, outcome(second, OutcomeKind.SUCCEEDED, attempt=1), worker=OTHER_WORKER, now=later
    )

    assert stale.stale == wrong_attempt.stale == {leased.id}
    assert snapshot() == before
    assert report(store, outcome(second, OutcomeKind.SUCCEEDED), worker=OTHER_WORKER, now=later).applied == {
        second.id
    }


def test_an_outcome_for_an_unknown_or_never_claimed_job_is_stale(store):
    pending = enqueue_one(store)
    before = snapshot()

    result = report(
        store,
        OutcomeReport(job_id=pending.id, attempt=0, kind=OutcomeKind.SUCCEEDED),
        OutcomeReport(job_id=10**9, attempt=1, kind=OutcomeKind.SUCCEEDED),
        now=SOON,
    )

    assert (result.applied, result.stale) == (frozenset(), {pending.id, 10**9})
    assert snapshot() == before


def test_a_renewed_lease_accepts_an_outcome_after_the_original_expiry(store, leased):
    store.heartbeat(
        worker_id=WORKER, job_ids=[leased.id], lease_duration=LEASE, now=T0 + timedelta(seconds=50)
    )
    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=T0 + LEASE + timedelta(seconds=1))
    assert result.applied == {leased.id}


# -- batches -----------------------------------------------------------------------------------------------


def test_an_empty_batch_returns_an_empty_result(store):
    result = report(store, now=SOON)
    assert (result.applied, result.stale) == (frozenset(), frozenset())


def test_a_batch_mixes_applied_and_stale_rows_and_applies_only_the_fresh_ones(store):
    enqueue(store, 4)
    ok, failing, wrong_attempt, foreign = claim(store)
    Lease.objects.filter(job_id=foreign.id).update(owner=OTHER_WORKER)
    before_stale = {
        j.id: (fresh(j.id).state, fresh(j.id).attempt, lease_of(j.id).expires_at)
        for j in (wrong_attempt, foreign)
    }

    result = report(
        store,
        outcome(ok, OutcomeKind.SUCCEEDED),
        outcome(failing, OutcomeKind.FAILED, retry_at=SOON + timedelta(seconds=2)),
        outcome(wrong_attempt, OutcomeKind.SUCCEEDED, attempt=7),
        outcome(foreign, OutcomeKind.SUCCEEDED),
        now=SOON,
    )

    assert result.applied == {ok.id, failing.id}
    assert result.stale == {wrong_attempt.id, foreign.id}
    assert State(fresh(ok.id).state) is State.SUCCEEDED
    assert State(fresh(failing.id).state) is State.SCHEDULED
    for job_id, (state, attempt, expires_at) in before_stale.items():
        assert (fresh(job_id).state, fresh(job_id).attempt) == (state, attempt)
        assert lease_of(job_id).expires_at == expires_at
        assert outcomes_of(job_id) == []
    assert Outcome.objects.count() == 2


def test_a_batch_applies_each_kind_with_its_own_fields(store):
    enqueue(store, 4)
    a, b, c, d = claim(store)
    retry_a, retry_b = SOON + timedelta(seconds=2), SOON + timedelta(seconds=4)

    report(
        store,
        outcome(a, OutcomeKind.FAILED, retry_at=retry_a, message="first"),
        outcome(b, OutcomeKind.FAILED, retry_at=retry_b, message="second"),
        outcome(c, OutcomeKind.FAILED, message="dead one"),
        outcome(d, OutcomeKind.FAILED, message="dead two"),
        now=SOON,
    )

    assert (fresh(a.id).due_at, fresh(b.id).due_at) == (retry_a, retry_b)
    assert (fresh(c.id).terminal_cause, fresh(d.id).terminal_cause) == ("dead one", "dead two")
    assert [o.message for o in Outcome.objects.order_by("job_id")] == [
        "first",
        "second",
        "dead one",
        "dead two",
    ]


def test_a_job_reported_twice_in_one_batch_applies_once(store, leased):
    result = report(
        store,
        outcome(leased, OutcomeKind.SUCCEEDED),
        outcome(leased, OutcomeKind.FAILED, message="duplicate"),
        now=SOON,
    )

    assert result.applied == {leased.id}
    assert State(fresh(leased.id).state) is State.SUCCEEDED
    assert [o.kind for o in outcomes_of(leased.id)] == ["succeeded"]


def test_a_duplicate_row_with_a_wrong_attempt_does_not_fence_off_the_right_one(store, leased):
    result = report(
        store,
        outcome(leased, OutcomeKind.SUCCEEDED),
        outcome(leased, OutcomeKind.SUCCEEDED, attempt=leased.attempt + 1),
        now=SOON,
    )
    assert result.applied == {leased.id}
    assert State(fresh(leased.id).state) is State.SUCCEEDED


# -- cancel requests meet outcomes -------------------------------------------------------------------------


def test_a_failure_of_a_cancel_requested_job_cancels_it_instead_of_retrying(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)

    report(store, outcome(leased, OutcomeKind.FAILED, retry_at=SOON, message="interrupted"), now=SOON)

    job = fresh(leased.id)
    assert (State(job.state), job.cancel_requested, job.terminal_at) == (State.CANCELLED, False, SOON)
    [row] = outcomes_of(leased.id)
    assert (row.kind, row.state_after) == ("failed", "cancelled")


def test_a_ceiling_failure_of_a_cancel_requested_job_cancels_it(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)
    report(store, outcome(leased, OutcomeKind.FAILED, message="interrupted"), now=SOON)
    assert State(fresh(leased.id).state) is State.CANCELLED


def test_a_success_of_a_cancel_requested_job_still_succeeds(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)
    report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=SOON)
    assert State(fresh(leased.id).state) is State.SUCCEEDED


# -- failure detail ----------------------------------------------------------------------------------------


def test_failure_detail_is_stored_on_the_outcome(store, leased):
    detail = 'Traceback (most recent call last):\n  File "x.py"\nValueError: bad'

    report(
        store,
        outcome(leased, OutcomeKind.FAILED, message="ValueError: bad"),
        now=SOON,
        details={leased.id: detail},
    )

    [row] = outcomes_of(leased.id)
    assert (row.message, row.detail) == ("ValueError: bad", detail)


def test_failure_detail_is_truncated_to_8_kib_without_splitting_a_character(store, leased):
    detail = "€" * 5000  # three bytes each: 15000 bytes, and 8192 is not a multiple of three

    report(store, outcome(leased, OutcomeKind.FAILED, retry_at=SOON), now=SOON, details={leased.id: detail})

    stored = outcomes_of(leased.id)[0].detail
    assert len(stored.encode("utf-8")) <= MAX_DETAIL_BYTES
    assert stored == "€" * (MAX_DETAIL_BYTES // 3)


def test_failure_detail_within_the_limit_is_kept_whole(store, leased):
    detail = "x" * MAX_DETAIL_BYTES
    report(store, outcome(leased, OutcomeKind.FAILED), now=SOON, details={leased.id: detail})
    assert outcomes_of(leased.id)[0].detail == detail


def test_failure_detail_for_a_stale_report_is_discarded(store, leased):
    report(
        store,
        outcome(leased, OutcomeKind.FAILED),
        worker=OTHER_WORKER,
        now=SOON,
        details={leased.id: "trace"},
    )
    assert not Outcome.objects.exists()
