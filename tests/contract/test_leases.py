"""The life of a Lease after the claim: heartbeats renew it, the sweep ends it, a release gives it back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import HeartbeatResult, OutcomeKind
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import State
from backwave_django.models import Lease, Outcome

from ..conftest import LEASE, T0
from ..factories import LeaseFactory
from .support import (
    NO_BACKOFF,
    OTHER_WORKER,
    RETRY,
    WORKER,
    as_claimed,
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

LAPSED = T0 + LEASE  # the lease of a job claimed at T0 is dead at this instant


def beat(store, job_ids, *, worker=WORKER, now, lease=LEASE):
    return store.heartbeat(worker_id=worker, job_ids=list(job_ids), lease_duration=lease, now=now)


def sweep(store, *, now, queues=("default",), max_jobs=100, retry=RETRY):
    return store.expire_leases(queues=list(queues), max_jobs=max_jobs, retry=retry, now=now)


# -- heartbeat ---------------------------------------------------------------------------------------------


def test_a_heartbeat_renews_this_workers_live_lease_from_now(store):
    job = enqueue_one(store)
    claim(store)
    now = T0 + timedelta(seconds=40)

    results = beat(store, [job.id], now=now, lease=timedelta(minutes=2))

    assert results == [HeartbeatResult(job_id=job.id, renewed=True, cancel_requested=False)]
    lease = lease_of(job.id)
    assert (lease.expires_at, lease.claimed_at, lease.attempt) == (now + timedelta(minutes=2), T0, 1)


def test_a_heartbeat_does_not_renew_another_workers_lease(store):
    job = enqueue_one(store)
    claim(store)
    store.cancel(job.id, actor="ops", now=T0)
    before = snapshot()

    results = beat(store, [job.id], worker=OTHER_WORKER, now=T0 + timedelta(seconds=10))

    assert results == [HeartbeatResult(job_id=job.id, renewed=False, cancel_requested=False)]
    assert snapshot() == before


def test_a_heartbeat_at_the_expiry_instant_is_too_late(store):
    job = enqueue_one(store)
    claim(store)
    before = snapshot()

    assert beat(store, [job.id], now=LAPSED) == [
        HeartbeatResult(job_id=job.id, renewed=False, cancel_requested=False)
    ]
    assert snapshot() == before


def test_a_heartbeat_reports_lost_leases_beside_renewed_ones_in_input_order(store):
    kept, swept, finished = enqueue(store, 3)
    claim(store)
    Lease.objects.filter(job_id=swept.id).update(expires_at=T0 + timedelta(seconds=5))
    report(store, outcome(as_claimed(finished.id), OutcomeKind.SUCCEEDED), now=T0 + timedelta(seconds=1))
    now = T0 + timedelta(seconds=30)

    results = beat(store, [finished.id, kept.id, swept.id, 10**9], now=now)

    assert [(r.job_id, r.renewed) for r in results] == [
        (finished.id, False),
        (kept.id, True),
        (swept.id, False),
        (10**9, False),
    ]
    assert lease_of(swept.id).expires_at == T0 + timedelta(seconds=5)  # a lost lease is not revived


def test_a_heartbeat_surfaces_a_cancel_request_on_a_renewed_lease(store):
    asked, left = enqueue(store, 2)
    claim(store)
    store.cancel(asked.id, actor="ops", now=T0 + timedelta(seconds=1))

    results = beat(store, [asked.id, left.id], now=T0 + timedelta(seconds=2))

    assert results == [
        HeartbeatResult(job_id=asked.id, renewed=True, cancel_requested=True),
        HeartbeatResult(job_id=left.id, renewed=True, cancel_requested=False),
    ]


def test_a_heartbeat_of_no_jobs_returns_nothing(store):
    assert beat(store, [], now=T0) == []


def test_a_heartbeat_writes_no_outcome_and_keeps_the_attempt(store):
    job = enqueue_one(store)
    claim(store)
    for seconds in (20, 40, 60, 80):
        beat(store, [job.id], now=T0 + timedelta(seconds=seconds))
    assert (fresh(job.id).attempt, Outcome.objects.count()) == (1, 0)
    assert lease_of(job.id).expires_at == T0 + timedelta(seconds=80) + LEASE


# -- expiry sweep ------------------------------------------------------------------------------------------


def test_the_sweep_ignores_live_leases(store):
    enqueue_one(store)
    claim(store)
    before = snapshot()
    assert sweep(store, now=LAPSED - timedelta(microseconds=1)) == 0
    assert snapshot() == before


def test_a_lapsed_lease_is_retried_with_backoff_and_counts_as_an_attempt(store):
    job = enqueue_one(store, max_attempts=3)
    claim(store)
    now = LAPSED + timedelta(seconds=5)

    assert sweep(store, now=now) == 1

    stored = fresh(job.id)
    assert (State(stored.state), stored.attempt) == (State.SCHEDULED, 1)
    assert stored.due_at == now + RETRY.backoff(1)
    assert lease_of(job.id) is None
    [row] = outcomes_of(job.id)
    assert (row.kind, row.state_after, row.attempt, row.worker) == ("expired", "scheduled", 1, WORKER)
    assert row.detail == ""  # an expiry never carries failure detail
    assert claim_one(store, now=stored.due_at).attempt == 2


def test_a_lease_is_swept_at_its_expiry_instant(store):
    enqueue_one(store)
    claim(store)
    assert sweep(store, now=LAPSED) == 1


def test_the_sweep_dead_letters_at_the_jobs_own_ceiling_with_the_standard_cause(store):
    job = enqueue_one(store, max_attempts=2)
    generous = RetryPolicy(max_attempts=10, backoff_base=1.0, backoff_cap=0.0)
    now = T0
    for _ in range(2):
        claim(store, now=now)
        now += LEASE
        sweep(store, now=now, retry=generous)

    stored = fresh(job.id)
    assert (State(stored.state), stored.attempt) == (State.DEAD_LETTERED, 2)
    assert (stored.terminal_at, stored.terminal_cause) == (
        now,
        "lease expired on attempt 2 (ceiling reached)",
    )
    assert [(o.kind, o.state_after) for o in outcomes_of(job.id)] == [
        ("expired", "scheduled"),
        ("expired", "dead_lettered"),
    ]


def test_the_sweep_retries_up_to_the_jobs_ceiling_even_above_the_policys_default(store):
    job = enqueue_one(store, max_attempts=3)
    stingy = RetryPolicy(max_attempts=1, backoff_base=1.0, backoff_cap=0.0)
    now = T0
    for _ in range(2):
        claim(store, now=now)
        now += LEASE
        sweep(store, now=now, retry=stingy)
        assert State(fresh(job.id).state) is State.SCHEDULED
    claim(store, now=now)
    sweep(store, now=now + LEASE, retry=stingy)
    assert State(fresh(job.id).state) is State.DEAD_LETTERED


def test_the_sweep_uses_the_backoff_of_the_policy_it_is_given(store):
    job = enqueue_one(store)
    claim(store)
    slow = RetryPolicy(backoff_base=10.0, backoff_cap=3600.0, jitter=False)

    sweep(store, now=LAPSED, retry=slow)

    assert fresh(job.id).due_at == LAPSED + timedelta(seconds=10)


def test_the_sweep_of_a_cancel_requested_job_cancels_it(store):
    job = enqueue_one(store)
    claim(store)
    store.cancel(job.id, actor="ops", now=T0)

    assert sweep(store, now=LAPSED) == 1

    stored = fresh(job.id)
    assert (State(stored.state), stored.terminal_at, stored.cancel_requested) == (
        State.CANCELLED,
        LAPSED,
        False,
    )
    assert [(o.kind, o.state_after) for o in outcomes_of(job.id)] == [("expired", "cancelled")]


def test_the_sweep_touches_only_the_given_queues(store):
    mine = enqueue_one(store, queue="mine")
    theirs = enqueue_one(store, queue="theirs")
    claim(store, queues=["mine", "theirs"])

    assert sweep(store, queues=["mine"], now=LAPSED) == 1

    assert State(fresh(mine.id).state) is State.SCHEDULED
    assert State(fresh(theirs.id).state) is State.LEASED


def test_a_sweep_of_no_queues_is_a_no_op(store):
    enqueue_one(store)
    claim(store)
    before = snapshot()
    assert sweep(store, queues=[], now=LAPSED + timedelta(hours=1)) == 0
    assert snapshot() == before


def test_a_sweep_of_zero_jobs_is_a_no_op(store):
    enqueue_one(store)
    claim(store)
    before = snapshot()
    assert sweep(store, max_jobs=0, now=LAPSED) == 0
    assert snapshot() == before


def test_the_sweep_takes_the_oldest_lapsed_leases_first_and_at_most_max_jobs(store):
    expiries = [T0 + timedelta(seconds=s) for s in (30, 10, 50, 20)]
    jobs = [LeaseFactory(expires_at=at).job for at in expiries]
    now = T0 + timedelta(minutes=5)

    assert sweep(store, max_jobs=2, now=now) == 2

    swept = {j.id for j in jobs if lease_of(j.id) is None}
    assert swept == {jobs[1].id, jobs[3].id}  # the 10 s and 20 s leases
    assert sweep(store, max_jobs=10, now=now) == 2
    assert not Lease.objects.exists()


def test_an_expired_attempt_reported_after_the_sweep_is_stale(store):
    job = enqueue_one(store)
    claimed = claim_one(store)
    sweep(store, now=LAPSED)
    before = snapshot()

    assert report(store, outcome(claimed, OutcomeKind.SUCCEEDED), now=LAPSED).stale == {job.id}
    assert snapshot() == before


def test_a_swept_job_cycles_until_its_ceiling_and_never_runs_more_than_max_attempts(store):
    job = enqueue_one(store, max_attempts=4)
    now, attempts = T0, []
    while claimed := claim(store, now=now):
        attempts.append(claimed[0].attempt)
        now += LEASE
        sweep(store, now=now, retry=NO_BACKOFF)
    assert attempts == [1, 2, 3, 4]
    assert State(fresh(job.id).state) is State.DEAD_LETTERED


# -- release at shutdown -----------------------------------------------------------------------------------


def test_a_release_returns_the_job_due_now_without_counting_the_attempt(store):
    job = enqueue_one(store, due_at=T0 - timedelta(minutes=1))
    claim(store)
    now = T0 + timedelta(seconds=20)

    assert store.release(worker_id=WORKER, job_ids=[job.id], now=now) == 1

    stored = fresh(job.id)
    assert (State(stored.state), stored.attempt, stored.due_at) == (State.SCHEDULED, 0, now)
    assert lease_of(job.id) is None
    [row] = outcomes_of(job.id)
    assert (row.kind, row.state_after, row.attempt, row.worker) == ("released", "scheduled", 1, WORKER)
    assert claim_one(store, worker=OTHER_WORKER, now=now).attempt == 1


def test_a_release_gives_back_only_this_workers_leases(store):
    mine, theirs = enqueue(store, 2)
    claim(store, max_jobs=1)
    claim(store, worker=OTHER_WORKER, max_jobs=1)

    assert store.release(worker_id=WORKER, job_ids=[mine.id, theirs.id, 10**9], now=T0) == 1

    assert State(fresh(mine.id).state) is State.SCHEDULED
    assert State(fresh(theirs.id).state) is State.LEASED
    assert lease_of(theirs.id).owner == OTHER_WORKER


def test_a_release_of_a_cancel_requested_job_cancels_it(store):
    job = enqueue_one(store)
    claim(store)
    store.cancel(job.id, actor="ops", now=T0)

    store.release(worker_id=WORKER, job_ids=[job.id], now=T0 + timedelta(seconds=1))

    stored = fresh(job.id)
    assert (State(stored.state), stored.cancel_requested) == (State.CANCELLED, False)
    assert [(o.kind, o.state_after) for o in outcomes_of(job.id)] == [("released", "cancelled")]


def test_a_release_of_nothing_changes_nothing(store):
    enqueue_one(store)
    claim(store)
    before = snapshot()
    assert store.release(worker_id=WORKER, job_ids=[], now=T0) == 0
    assert store.release(worker_id=OTHER_WORKER, job_ids=[1, 2, 3], now=T0) == 0
    assert snapshot() == before


def test_a_lapsed_lease_cannot_be_released_and_the_sweep_still_counts_its_attempt(store):
    job = enqueue_one(store)
    claim(store)
    before = snapshot()

    assert store.release(worker_id=WORKER, job_ids=[job.id], now=LAPSED) == 0

    assert snapshot() == before
    sweep(store, now=LAPSED)
    assert (State(fresh(job.id).state), fresh(job.id).attempt) == (State.SCHEDULED, 1)


def test_a_released_attempt_is_not_counted_toward_the_ceiling(store):
    job = enqueue_one(store, max_attempts=1)
    for seconds in range(3):
        now = T0 + timedelta(seconds=seconds)
        claim(store, now=now)
        store.release(worker_id=WORKER, job_ids=[job.id], now=now)
    claimed = claim_one(store, now=T0 + timedelta(seconds=5))
    assert claimed.attempt == 1
    report(store, outcome(claimed, OutcomeKind.FAILED, message="once"), now=T0 + timedelta(seconds=6))
    assert State(fresh(job.id).state) is State.DEAD_LETTERED


def test_lease_factory_rows_behave_like_claimed_ones(store):
    lease = LeaseFactory(owner=WORKER, expires_at=T0 + timedelta(seconds=30))
    assert beat(store, [lease.job_id], now=T0)[0].renewed is True
    assert report(store, outcome(as_claimed(lease.job_id), OutcomeKind.SUCCEEDED), now=T0).applied == {
        lease.job_id
    }
