"""The life of a Lease after the claim: heartbeats renew it, the sweep ends it, a RELEASED report gives it
back at shutdown without counting the Attempt."""

from __future__ import annotations

from datetime import timedelta

from backwave_django.core.records import HeartbeatResult, OutcomeKind
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import State

from ..conftest import LEASE, T0
from .support import (
    NO_BACKOFF,
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
    outcome,
    report,
    snapshot,
    state_of,
    sweep,
)

LAPSED = T0 + LEASE  # the lease of a job claimed at T0 is dead at this instant


def kinds_and_states(store, job_id):
    return [(o.kind, o.state_after) for o in store.list_outcomes(job_id)]


# -- heartbeat ---------------------------------------------------------------------------------------------


def test_a_heartbeat_renews_this_workers_live_lease_from_now(store):
    new = enqueue_one(store)
    claim(store)
    now = T0 + timedelta(seconds=40)

    results = beat(store, [new.id], now=now, lease=timedelta(minutes=2))

    assert results == [HeartbeatResult(job_id=new.id, renewed=True, cancel_requested=False)]
    lease = store.get_lease(new.id)
    assert (lease.expires_at, lease.claimed_at, lease.attempt) == (now + timedelta(minutes=2), T0, 1)


def test_a_heartbeat_does_not_renew_another_workers_lease(store):
    new = enqueue_one(store)
    claim(store)
    store.cancel(new.id, actor="ops", now=T0)
    before = snapshot(store)

    results = beat(store, [new.id], worker=OTHER_WORKER, now=T0 + timedelta(seconds=10))

    assert results == [HeartbeatResult(job_id=new.id, renewed=False, cancel_requested=False)]
    assert snapshot(store) == before


def test_a_heartbeat_at_the_expiry_instant_is_too_late(store):
    new = enqueue_one(store)
    claim(store)
    before = snapshot(store)

    assert beat(store, [new.id], now=LAPSED) == [
        HeartbeatResult(job_id=new.id, renewed=False, cancel_requested=False)
    ]
    assert snapshot(store) == before


def test_a_heartbeat_reports_lost_leases_beside_renewed_ones_in_input_order(store):
    kept, lapsed, finished = enqueue(store, 3)
    claim(store, max_jobs=1, lease=timedelta(seconds=5))  # ``kept``: renewed below, before it lapses
    claim(store, max_jobs=1, lease=timedelta(seconds=5))  # ``lapsed``: never renewed
    [done] = claim(store)
    beat(store, [kept.id], now=T0 + timedelta(seconds=4))
    report(store, outcome(done, OutcomeKind.SUCCEEDED), now=T0 + timedelta(seconds=1))
    now = T0 + timedelta(seconds=30)

    results = beat(store, [finished.id, kept.id, lapsed.id, UNKNOWN_ID], now=now)

    assert [(r.job_id, r.renewed) for r in results] == [
        (finished.id, False),
        (kept.id, True),
        (lapsed.id, False),
        (UNKNOWN_ID, False),
    ]
    assert store.get_lease(lapsed.id).expires_at == T0 + timedelta(seconds=5)  # a lost lease is not revived


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
    new = enqueue_one(store)
    claim(store)
    for seconds in (20, 40, 60, 80):
        beat(store, [new.id], now=T0 + timedelta(seconds=seconds))
    assert (job(store, new.id).attempt, store.list_outcomes(new.id)) == (1, [])
    assert store.get_lease(new.id).expires_at == T0 + timedelta(seconds=80) + LEASE


# -- expiry sweep ------------------------------------------------------------------------------------------


def test_the_sweep_ignores_live_leases(store):
    enqueue_one(store)
    claim(store)
    before = snapshot(store)
    assert sweep(store, now=LAPSED - timedelta(microseconds=1)) == 0
    assert snapshot(store) == before


def test_a_lapsed_lease_is_retried_with_backoff_and_counts_as_an_attempt(store):
    new = enqueue_one(store, max_attempts=3)
    claim(store)
    now = LAPSED + timedelta(seconds=5)

    assert sweep(store, now=now) == 1

    stored = job(store, new.id)
    assert (stored.state, stored.attempt) == (State.SCHEDULED, 1)
    assert stored.due_at == now + RETRY.backoff(1)
    assert store.get_lease(new.id) is None
    [row] = store.list_outcomes(new.id)
    assert (row.kind, row.state_after, row.attempt, row.worker) == (
        OutcomeKind.EXPIRED,
        State.SCHEDULED,
        1,
        WORKER,
    )
    assert (row.message, row.detail, row.recorded_at) == ("lease expired on attempt 1", "", now)
    assert claim_one(store, now=stored.due_at).attempt == 2


def test_the_sweep_draws_each_jobs_jitter_from_the_job_and_its_attempt(store):
    jittered = RetryPolicy(backoff_base=2.0, backoff_cap=300.0, jitter=True)
    ids = [e.id for e in enqueue(store, 4, max_attempts=5)]
    claim(store)

    sweep(store, now=LAPSED, retry=jittered)

    assert [job(store, i).due_at for i in ids] == [jittered.next_attempt_at(1, 5, LAPSED, key=i) for i in ids]


def test_a_lease_is_swept_at_its_expiry_instant(store):
    enqueue_one(store)
    claim(store)
    assert sweep(store, now=LAPSED) == 1


def test_the_sweep_dead_letters_at_the_jobs_own_ceiling_with_the_standard_cause(store):
    new = enqueue_one(store, max_attempts=2)
    generous = RetryPolicy(max_attempts=10, backoff_base=1.0, backoff_cap=0.0)
    now = T0
    for _ in range(2):
        claim(store, now=now)
        now += LEASE
        sweep(store, now=now, retry=generous)

    stored = job(store, new.id)
    assert (stored.state, stored.attempt) == (State.DEAD_LETTERED, 2)
    assert (stored.terminal_at, stored.terminal_cause) == (
        now,
        "lease expired on attempt 2 (ceiling reached)",
    )
    assert kinds_and_states(store, new.id) == [
        (OutcomeKind.EXPIRED, State.SCHEDULED),
        (OutcomeKind.EXPIRED, State.DEAD_LETTERED),
    ]


def test_the_sweep_retries_up_to_the_jobs_ceiling_even_above_the_policys_default(store):
    new = enqueue_one(store, max_attempts=3)
    stingy = RetryPolicy(max_attempts=1, backoff_base=1.0, backoff_cap=0.0)
    now = T0
    for _ in range(2):
        claim(store, now=now)
        now += LEASE
        sweep(store, now=now, retry=stingy)
        assert state_of(store, new.id) is State.SCHEDULED
    claim(store, now=now)
    sweep(store, now=now + LEASE, retry=stingy)
    assert state_of(store, new.id) is State.DEAD_LETTERED


def test_the_sweep_uses_the_backoff_of_the_policy_it_is_given(store):
    new = enqueue_one(store)
    claim(store)
    slow = RetryPolicy(backoff_base=10.0, backoff_cap=3600.0, jitter=False)

    sweep(store, now=LAPSED, retry=slow)

    assert job(store, new.id).due_at == LAPSED + timedelta(seconds=10)


def test_the_sweep_of_a_cancel_requested_job_cancels_it(store):
    new = enqueue_one(store)
    claim(store)
    store.cancel(new.id, actor="ops", now=T0)

    assert sweep(store, now=LAPSED) == 1

    stored = job(store, new.id)
    assert (stored.state, stored.terminal_at, stored.cancel_requested) == (State.CANCELLED, LAPSED, False)
    assert stored.terminal_cause == "operator-cancel (its lease expired)"
    assert kinds_and_states(store, new.id) == [(OutcomeKind.EXPIRED, State.CANCELLED)]


def test_the_sweep_touches_only_the_given_queues(store):
    mine = enqueue_one(store, queue="mine")
    theirs = enqueue_one(store, queue="theirs")
    claim(store, queues=["mine", "theirs"])

    assert sweep(store, queues=["mine"], now=LAPSED) == 1

    assert state_of(store, mine.id) is State.SCHEDULED
    assert state_of(store, theirs.id) is State.LEASED


def test_a_sweep_of_no_queues_is_a_no_op(store):
    enqueue_one(store)
    claim(store)
    before = snapshot(store)
    assert sweep(store, queues=[], now=LAPSED + timedelta(hours=1)) == 0
    assert snapshot(store) == before


def test_a_sweep_of_zero_jobs_is_a_no_op(store):
    enqueue_one(store)
    claim(store)
    before = snapshot(store)
    assert sweep(store, max_jobs=0, now=LAPSED) == 0
    assert snapshot(store) == before


def test_the_sweep_takes_the_oldest_lapsed_leases_first_and_at_most_max_jobs(store):
    ids = [e.id for e in enqueue(store, 4)]
    for seconds in (30, 10, 50, 20):  # the four jobs' leases lapse at these offsets, in claim order
        claim(store, max_jobs=1, lease=timedelta(seconds=seconds))
    now = T0 + timedelta(minutes=5)

    assert sweep(store, max_jobs=2, now=now) == 2

    swept = {i for i in ids if store.get_lease(i) is None}
    assert swept == {ids[1], ids[3]}  # the 10 s and 20 s leases
    assert sweep(store, max_jobs=10, now=now) == 2
    assert [store.get_lease(i) for i in ids] == [None] * 4


def test_an_expired_attempt_reported_after_the_sweep_is_stale(store):
    new = enqueue_one(store)
    claimed = claim_one(store)
    sweep(store, now=LAPSED)
    before = snapshot(store)

    assert report(store, outcome(claimed, OutcomeKind.SUCCEEDED), now=LAPSED).stale == {new.id}
    assert snapshot(store) == before


def test_a_swept_job_cycles_until_its_ceiling_and_never_runs_more_than_max_attempts(store):
    new = enqueue_one(store, max_attempts=4)
    now, attempts = T0, []
    while claimed := claim(store, now=now):
        attempts.append(claimed[0].attempt)
        now += LEASE
        sweep(store, now=now, retry=NO_BACKOFF)
    assert attempts == [1, 2, 3, 4]
    assert state_of(store, new.id) is State.DEAD_LETTERED


# -- release at shutdown: a report of kind RELEASED --------------------------------------------------------


def release(store, *claimed, worker=WORKER, now):
    return report(store, *(outcome(c, OutcomeKind.RELEASED) for c in claimed), worker=worker, now=now)


def test_a_release_returns_the_job_due_now_without_counting_the_attempt(store):
    new = enqueue_one(store, due_at=T0 - timedelta(minutes=1))
    claimed = claim_one(store)
    now = T0 + timedelta(seconds=20)

    assert release(store, claimed, now=now).applied == {new.id}

    stored = job(store, new.id)
    assert (stored.state, stored.attempt, stored.due_at) == (State.SCHEDULED, 0, now)
    assert (stored.terminal_at, stored.terminal_cause) == (None, "")
    assert store.get_lease(new.id) is None
    [row] = store.list_outcomes(new.id)
    assert (row.kind, row.state_after, row.attempt, row.worker, row.message) == (
        OutcomeKind.RELEASED,
        State.SCHEDULED,
        1,
        WORKER,
        "released at shutdown",
    )
    assert claim_one(store, worker=OTHER_WORKER, now=now).attempt == 1


def test_a_release_gives_back_only_this_workers_leases(store):
    mine, theirs = enqueue(store, 2)
    [held] = claim(store, max_jobs=1)
    [other] = claim(store, worker=OTHER_WORKER, max_jobs=1)

    result = release(store, held, other, now=T0)

    assert (result.applied, result.stale) == ({mine.id}, {theirs.id})
    assert state_of(store, mine.id) is State.SCHEDULED
    assert state_of(store, theirs.id) is State.LEASED
    assert store.get_lease(theirs.id).owner == OTHER_WORKER


def test_a_release_of_a_cancel_requested_job_cancels_it(store):
    new = enqueue_one(store)
    claimed = claim_one(store)
    store.cancel(new.id, actor="ops", now=T0)

    release(store, claimed, now=T0 + timedelta(seconds=1))

    stored = job(store, new.id)
    assert (stored.state, stored.cancel_requested, stored.attempt) == (
        State.CANCELLED,
        False,
        0,
    )  # given back
    assert kinds_and_states(store, new.id) == [(OutcomeKind.RELEASED, State.CANCELLED)]


def test_a_release_of_another_workers_or_an_unknown_job_changes_nothing(store):
    enqueue_one(store)
    claimed = claim_one(store)
    before = snapshot(store)

    assert release(store, claimed, worker=OTHER_WORKER, now=T0).stale == {claimed.id}

    assert snapshot(store) == before


def test_a_lapsed_lease_cannot_be_released_and_the_sweep_still_counts_its_attempt(store):
    new = enqueue_one(store)
    claimed = claim_one(store)
    before = snapshot(store)

    assert release(store, claimed, now=LAPSED).stale == {new.id}

    assert snapshot(store) == before
    sweep(store, now=LAPSED)
    assert (state_of(store, new.id), job(store, new.id).attempt) == (State.SCHEDULED, 1)


def test_a_released_attempt_is_not_counted_toward_the_ceiling(store):
    new = enqueue_one(store, max_attempts=1)
    for seconds in range(3):
        now = T0 + timedelta(seconds=seconds)
        claimed = claim_one(store, now=now)
        assert claimed.attempt == 1
        release(store, claimed, now=now)
    claimed = claim_one(store, now=T0 + timedelta(seconds=5))
    assert claimed.attempt == 1
    report(store, outcome(claimed, OutcomeKind.FAILED, message="once"), now=T0 + timedelta(seconds=6))
    assert state_of(store, new.id) is State.DEAD_LETTERED
    assert [(o.kind, o.attempt) for o in store.list_outcomes(new.id)] == [
        (OutcomeKind.RELEASED, 1),
        (OutcomeKind.RELEASED, 1),
        (OutcomeKind.RELEASED, 1),
        (OutcomeKind.FAILED, 1),
    ]


def test_a_released_job_keeps_its_place_by_being_due_at_the_release(store):
    """Released work is due at once: claimed before work that comes due later, after work due earlier."""
    [first, second] = enqueue(store, 2, due_at=T0)
    claimed = claim_one(store)
    later = enqueue_one(store, due_at=T0 + timedelta(seconds=30))

    release(store, claimed, now=T0 + timedelta(seconds=10))

    order = [c.id for c in claim(store, now=T0 + timedelta(minutes=1))]
    assert order == [second.id, first.id, later.id]
