"""Outcome reports: fenced by the Lease's (owner, attempt) and ``expires_at > now``; one Outcome each. The
store decides retries: through the transition table, with the retry policy it is given and the ceiling the
worker reports."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import TRANSITIONS, State
from backwave_django.store.contract import MAX_DETAIL_BYTES, OutcomeDetail

from ..conftest import LEASE, T0
from .support import (
    MAX_PAYLOAD,
    OTHER_WORKER,
    RETRY,
    UNKNOWN_ID,
    WORKER,
    beat,
    claim,
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

SOON = T0 + timedelta(seconds=10)


@pytest.fixture
def leased(store):
    """One job claimed by WORKER at T0 (attempt 1 of 3, lease until T0 + LEASE)."""
    enqueue_one(store, max_attempts=3)
    return claim_one(store)


def test_a_success_makes_the_job_succeeded_and_ends_its_lease(store, leased):
    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED, message="ok"), now=SOON)

    assert (result.applied, result.stale) == ({leased.id}, frozenset())
    stored = job(store, leased.id)
    assert (stored.state, stored.attempt, stored.terminal_at, stored.terminal_cause) == (
        State.SUCCEEDED,
        1,
        SOON,
        "",
    )
    assert store.get_lease(leased.id) is None
    [row] = store.list_outcomes(leased.id)
    assert (row.attempt, row.worker, row.kind, row.state_after) == (
        1,
        WORKER,
        OutcomeKind.SUCCEEDED,
        State.SUCCEEDED,
    )
    assert row.recorded_at == SOON


def test_a_failure_with_attempts_left_reschedules_the_job_at_the_policys_time(store, leased):
    retry_at = RETRY.next_attempt_at(1, 3, SOON, key=leased.id)

    report(store, outcome(leased, OutcomeKind.FAILED, message="boom"), now=SOON)

    stored = job(store, leased.id)
    assert (stored.state, stored.due_at, stored.attempt) == (State.SCHEDULED, retry_at, 1)
    assert retry_at == SOON + timedelta(seconds=2)
    assert (stored.terminal_at, stored.terminal_cause) == (None, "")
    assert store.get_lease(leased.id) is None
    [row] = store.list_outcomes(leased.id)
    assert (row.kind, row.state_after, row.message) == (OutcomeKind.FAILED, State.SCHEDULED, "boom")
    assert claim(store, now=retry_at - timedelta(microseconds=1)) == []
    assert claim_one(store, now=retry_at).attempt == 2


def test_a_failure_is_retried_with_the_jitter_of_the_job_and_its_attempt(store):
    jittered = RetryPolicy(backoff_base=3.0, backoff_cap=300.0, jitter=True)
    ids = [e.id for e in enqueue(store, 4, max_attempts=5)]
    claimed = claim(store)

    report(store, *(outcome(c, OutcomeKind.FAILED) for c in claimed), retry=jittered, now=SOON)

    assert [job(store, i).due_at for i in ids] == [jittered.next_attempt_at(1, 5, SOON, key=i) for i in ids]


def test_a_failure_at_the_reported_ceiling_dead_letters_with_the_message_as_cause(store, leased):
    report(
        store,
        outcome(leased, OutcomeKind.FAILED, message="ValueError: bad input", max_attempts=leased.attempt),
        now=SOON,
    )

    stored = job(store, leased.id)
    assert stored.state is State.DEAD_LETTERED
    assert (stored.terminal_at, stored.terminal_cause) == (SOON, "ValueError: bad input")
    assert store.get_lease(leased.id) is None
    [row] = store.list_outcomes(leased.id)
    assert (row.kind, row.state_after) == (OutcomeKind.FAILED, State.DEAD_LETTERED)


def test_the_ceiling_is_the_jobs_own_even_below_the_policys_default(store):
    """The retry policy's ``max_attempts`` is only a default for jobs that set none; a job's own wins."""
    enqueue_one(store, max_attempts=1)
    claimed = claim_one(store)

    report(store, outcome(claimed, OutcomeKind.FAILED, message="once"), retry=RETRY, now=SOON)

    assert state_of(store, claimed.id) is State.DEAD_LETTERED


def test_a_cancelled_outcome_cancels_the_job_and_clears_the_request(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)

    report(store, outcome(leased, OutcomeKind.CANCELLED), now=SOON)

    stored = job(store, leased.id)
    assert (stored.state, stored.terminal_at, stored.cancel_requested) == (State.CANCELLED, SOON, False)
    assert stored.terminal_cause == "operator-cancel"
    [row] = store.list_outcomes(leased.id)
    assert (row.kind, row.state_after) == (OutcomeKind.CANCELLED, State.CANCELLED)


def test_an_unroutable_outcome_quarantines_the_job_with_its_reason(store, leased):
    reason = "no handler registered for 'tests.noop'"

    report(store, outcome(leased, OutcomeKind.UNROUTABLE, message=reason), now=SOON)

    stored = job(store, leased.id)
    assert (stored.state, stored.terminal_at, stored.terminal_cause) == (State.QUARANTINED, SOON, reason)
    [row] = store.list_outcomes(leased.id)
    assert (row.kind, row.state_after, row.message) == (OutcomeKind.UNROUTABLE, State.QUARANTINED, reason)


def test_every_applied_outcome_follows_a_legal_transition(store):
    enqueue(store, 6)
    claimed = claim(store)
    store.cancel(claimed[4].id, actor="ops", now=T0)
    reports = [
        outcome(claimed[0], OutcomeKind.SUCCEEDED),
        outcome(claimed[1], OutcomeKind.FAILED),
        outcome(claimed[2], OutcomeKind.FAILED, max_attempts=1),
        outcome(claimed[3], OutcomeKind.UNROUTABLE),
        outcome(claimed[4], OutcomeKind.CANCELLED),
        outcome(claimed[5], OutcomeKind.RELEASED),
    ]

    report(store, *reports, now=SOON)

    rows = [row for c in claimed for row in store.list_outcomes(c.id)]
    assert len(rows) == 6
    for row in rows:
        assert (State.LEASED, row.state_after) in TRANSITIONS
        assert state_of(store, row.job_id) is row.state_after


# -- the fence ---------------------------------------------------------------------------------------------


def test_a_stale_worker_outcome_changes_nothing(store, leased):
    before = snapshot(store)

    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), worker=OTHER_WORKER, now=SOON)

    assert (result.applied, result.stale) == (frozenset(), {leased.id})
    assert snapshot(store) == before


@pytest.mark.parametrize("attempt", [0, 2])
def test_an_outcome_for_another_attempt_changes_nothing(store, leased, attempt):
    before = snapshot(store)

    result = report(store, outcome(leased, OutcomeKind.FAILED, attempt=attempt), now=SOON)

    assert result.stale == {leased.id}
    assert snapshot(store) == before


def test_an_outcome_at_the_lease_expiry_instant_is_stale(store, leased):
    before = snapshot(store)

    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=T0 + LEASE)

    assert result.stale == {leased.id}
    assert snapshot(store) == before


def test_an_outcome_just_before_the_lease_expiry_instant_applies(store, leased):
    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=T0 + LEASE - timedelta(microseconds=1))
    assert result.applied == {leased.id}


def test_an_outcome_after_the_lease_expired_changes_nothing_even_before_the_sweep(store, leased):
    before = snapshot(store)
    result = report(store, outcome(leased, OutcomeKind.FAILED), now=T0 + LEASE * 2)
    assert result.stale == {leased.id}
    assert snapshot(store) == before


def test_an_already_reported_outcome_is_stale_the_second_time(store, leased):
    report(store, outcome(leased, OutcomeKind.FAILED), now=SOON)
    before = snapshot(store)

    again = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=SOON)

    assert again.stale == {leased.id}
    assert snapshot(store) == before


def test_a_previous_attempts_worker_cannot_report_over_the_next_attempt(store, leased):
    """A worker whose lease was swept comes back: the job's next Attempt belongs to someone else."""
    sweep(store, now=T0 + LEASE)
    later = T0 + LEASE + timedelta(minutes=5)
    second = claim_one(store, worker=OTHER_WORKER, now=later)
    before = snapshot(store)

    stale = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=later)
    wrong_attempt = report(
        store, outcome(second, OutcomeKind.SUCCEEDED, attempt=1), worker=OTHER_WORKER, now=later
    )

    assert stale.stale == wrong_attempt.stale == {leased.id}
    assert snapshot(store) == before
    assert report(store, outcome(second, OutcomeKind.SUCCEEDED), worker=OTHER_WORKER, now=later).applied == {
        second.id
    }


def test_an_outcome_for_an_unknown_or_never_claimed_job_is_stale(store):
    pending = enqueue_one(store)
    before = snapshot(store)

    result = report(
        store,
        OutcomeReport(job_id=pending.id, attempt=0, kind=OutcomeKind.SUCCEEDED, max_attempts=3),
        OutcomeReport(job_id=UNKNOWN_ID, attempt=1, kind=OutcomeKind.SUCCEEDED, max_attempts=3),
        now=SOON,
    )

    assert (result.applied, result.stale) == (frozenset(), {pending.id, UNKNOWN_ID})
    assert snapshot(store) == before


def test_a_renewed_lease_accepts_an_outcome_after_the_original_expiry(store, leased):
    beat(store, [leased.id], now=T0 + timedelta(seconds=50))
    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=T0 + LEASE + timedelta(seconds=1))
    assert result.applied == {leased.id}


# -- batches -----------------------------------------------------------------------------------------------


def test_an_empty_batch_returns_an_empty_result(store):
    before = snapshot(store)
    result = report(store, now=SOON)
    assert (result.applied, result.stale) == (frozenset(), frozenset())
    assert snapshot(store) == before


def test_a_batch_mixes_applied_and_stale_rows_and_applies_only_the_fresh_ones(store):
    enqueue(store, 4)
    ok, failing, wrong_attempt = claim(store, max_jobs=3)
    [foreign] = claim(store, worker=OTHER_WORKER)
    before_stale = {j.id: (job(store, j.id), store.get_lease(j.id)) for j in (wrong_attempt, foreign)}

    result = report(
        store,
        outcome(ok, OutcomeKind.SUCCEEDED),
        outcome(failing, OutcomeKind.FAILED),
        outcome(wrong_attempt, OutcomeKind.SUCCEEDED, attempt=7),
        outcome(foreign, OutcomeKind.SUCCEEDED),
        now=SOON,
    )

    assert result.applied == {ok.id, failing.id}
    assert result.stale == {wrong_attempt.id, foreign.id}
    assert state_of(store, ok.id) is State.SUCCEEDED
    assert state_of(store, failing.id) is State.SCHEDULED
    for job_id, (view, lease) in before_stale.items():
        assert (job(store, job_id), store.get_lease(job_id)) == (view, lease)
        assert store.list_outcomes(job_id) == []
    assert [len(store.list_outcomes(c.id)) for c in (ok, failing)] == [1, 1]


def test_a_batch_applies_each_row_with_its_own_fields(store):
    enqueue(store, 4)
    a, b, c, d = claim(store)
    jittered = RetryPolicy(backoff_base=2.0, backoff_cap=300.0, jitter=True)

    report(
        store,
        outcome(a, OutcomeKind.FAILED, message="first"),
        outcome(b, OutcomeKind.FAILED, message="second"),
        outcome(c, OutcomeKind.FAILED, message="dead one", max_attempts=1),
        outcome(d, OutcomeKind.FAILED, message="dead two", max_attempts=1),
        retry=jittered,
        now=SOON,
    )

    assert [job(store, x.id).due_at for x in (a, b)] == [
        jittered.next_attempt_at(1, 3, SOON, key=x.id) for x in (a, b)
    ]
    assert [job(store, x.id).terminal_cause for x in (c, d)] == ["dead one", "dead two"]
    assert [store.list_outcomes(x.id)[0].message for x in (a, b, c, d)] == [
        "first",
        "second",
        "dead one",
        "dead two",
    ]


def test_a_job_reported_twice_in_one_batch_applies_once_by_its_first_row(store, leased):
    result = report(
        store,
        outcome(leased, OutcomeKind.SUCCEEDED),
        outcome(leased, OutcomeKind.FAILED, message="duplicate"),
        now=SOON,
    )

    assert result.applied == {leased.id}
    assert state_of(store, leased.id) is State.SUCCEEDED
    assert [o.kind for o in store.list_outcomes(leased.id)] == [OutcomeKind.SUCCEEDED]


def test_a_duplicate_row_with_a_wrong_attempt_after_the_right_one_is_ignored(store, leased):
    result = report(
        store,
        outcome(leased, OutcomeKind.SUCCEEDED),
        outcome(leased, OutcomeKind.SUCCEEDED, attempt=leased.attempt + 1),
        now=SOON,
    )
    assert result.applied == {leased.id}
    assert state_of(store, leased.id) is State.SUCCEEDED


def test_a_stale_row_for_an_earlier_attempt_does_not_fence_off_the_current_one(store):
    """A worker can hold an unsent report of an Attempt it lost and one of the job's next Attempt, which it
    claimed again: the stale row comes first in the batch, and the current one still applies."""
    enqueue_one(store, max_attempts=3)
    first = claim_one(store)
    sweep(store, now=T0 + LEASE, retry=RETRY)
    later = T0 + LEASE + timedelta(minutes=1)
    second = claim_one(store, now=later)

    result = report(
        store,
        outcome(first, OutcomeKind.FAILED, message="lost"),
        outcome(second, OutcomeKind.SUCCEEDED),
        now=later,
    )

    assert (result.applied, result.stale) == ({second.id}, frozenset())
    assert [(o.kind, o.attempt) for o in store.list_outcomes(second.id)] == [
        (OutcomeKind.EXPIRED, 1),
        (OutcomeKind.SUCCEEDED, 2),
    ]
    assert state_of(store, second.id) is State.SUCCEEDED


# -- cancel requests meet outcomes -------------------------------------------------------------------------


def test_a_failure_of_a_cancel_requested_job_cancels_it_instead_of_retrying(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)

    report(store, outcome(leased, OutcomeKind.FAILED, message="interrupted"), now=SOON)

    stored = job(store, leased.id)
    assert (stored.state, stored.cancel_requested, stored.terminal_at) == (State.CANCELLED, False, SOON)
    [row] = store.list_outcomes(leased.id)
    assert (row.kind, row.state_after) == (OutcomeKind.FAILED, State.CANCELLED)


def test_a_ceiling_failure_of_a_cancel_requested_job_cancels_it(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)
    report(store, outcome(leased, OutcomeKind.FAILED, message="interrupted", max_attempts=1), now=SOON)
    assert state_of(store, leased.id) is State.CANCELLED


def test_a_success_of_a_cancel_requested_job_still_succeeds(store, leased):
    store.cancel(leased.id, actor="ops", now=T0)
    report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=SOON)
    stored = job(store, leased.id)
    assert (stored.state, stored.cancel_requested) == (State.SUCCEEDED, False)


# -- failure detail ----------------------------------------------------------------------------------------


def test_failure_detail_is_stored_on_the_outcome(store, leased):
    detail = 'Traceback (most recent call last):\n  File "x.py"\nValueError: bad'

    report(
        store,
        outcome(leased, OutcomeKind.FAILED, message="ValueError: bad"),
        now=SOON,
        details={leased.id: OutcomeDetail(traceback=detail)},
    )

    [row] = store.list_outcomes(leased.id)
    assert (row.message, row.detail) == ("ValueError: bad", detail)


def test_failure_detail_is_cut_to_8_kib_keeping_its_end_without_splitting_a_character(store, leased):
    detail = "€" * 5000  # three bytes each: 15000 bytes, and 8192 is not a multiple of three

    report(
        store,
        outcome(leased, OutcomeKind.FAILED),
        now=SOON,
        details={leased.id: OutcomeDetail(traceback=detail)},
    )

    stored = store.list_outcomes(leased.id)[0].detail
    assert len(stored.encode("utf-8")) <= MAX_DETAIL_BYTES
    assert stored == "[...]" + "€" * ((MAX_DETAIL_BYTES - 5) // 3)


def test_failure_detail_within_the_limit_is_kept_whole(store, leased):
    detail = "x" * MAX_DETAIL_BYTES
    report(
        store,
        outcome(leased, OutcomeKind.FAILED),
        now=SOON,
        details={leased.id: OutcomeDetail(traceback=detail)},
    )
    assert store.list_outcomes(leased.id)[0].detail == detail


def test_failure_detail_for_a_stale_report_is_discarded(store, leased):
    before = snapshot(store)
    report(
        store,
        outcome(leased, OutcomeKind.FAILED),
        worker=OTHER_WORKER,
        now=SOON,
        details={leased.id: OutcomeDetail(traceback="trace")},
    )
    assert snapshot(store) == before


# -- opened: whether a report may have made work claimable at once (the Pump then looks again) -------------


def test_an_empty_batch_opens_nothing(store):
    assert report(store).opened is False


def test_a_success_in_a_queue_without_a_limit_opens_nothing(store, leased):
    assert report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=SOON).opened is False


def test_a_failure_retried_later_opens_nothing(store, leased):
    assert report(store, outcome(leased, OutcomeKind.FAILED, message="later"), now=SOON).opened is False


def test_a_failure_retried_at_once_opens_work(store, leased):
    at_once = RetryPolicy(backoff_base=1.0, backoff_cap=0.0, jitter=False)
    result = report(store, outcome(leased, OutcomeKind.FAILED, message="again"), now=SOON, retry=at_once)
    assert result.opened is True
    assert job(store, leased.id).due_at <= SOON


def test_a_job_given_back_opens_work(store, leased):
    assert report(store, outcome(leased, OutcomeKind.RELEASED), now=SOON).opened is True


def test_a_stale_report_opens_nothing(store, leased):
    result = report(store, outcome(leased, OutcomeKind.RELEASED), worker=OTHER_WORKER, now=SOON)
    assert (result.applied, result.opened) == (frozenset(), False)


def test_an_ending_in_a_queue_with_a_concurrency_limit_opens_its_slot(store):
    store.set_concurrency_limit("limited", 1, actor="ops", now=T0)
    enqueue(store, 2, queue="limited")
    [first] = claim(store, queues=["limited"])  # the limit lets one through: the claim read it
    assert report(store, outcome(first, OutcomeKind.SUCCEEDED), now=SOON).opened is True
    assert len(claim(store, queues=["limited"], now=SOON)) == 1  # what the Pump's look finds


def test_the_end_of_a_job_others_depend_on_opens_work(store, leased):
    [child] = store.enqueue([replace(new_job(), parents=(leased.id,))], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=SOON).opened is True
    assert state_of(store, child.id) is State.SCHEDULED
