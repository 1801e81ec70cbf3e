"""Job dependencies, against every store: a child waits on its parents, starts once they are done (all
succeeded, for ``success``), is cancelled by a failed parent under ``success`` (the cascade goes on down),
and each edge resolves exactly once, in its parent's terminal transaction, under the fence."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.dependencies import MAX_PARENTS, Resolution, RunOn
from backwave_django.core.records import OutcomeKind
from backwave_django.core.retention import PurgeRule
from backwave_django.core.states import State
from backwave_django.store.contract import StoreError, UnknownParent

from ..conftest import LEASE, T0
from .support import (
    MAX_PAYLOAD,
    OTHER_WORKER,
    UNKNOWN_ID,
    claim,
    claim_one,
    enqueue_one,
    job,
    job_in_state,
    new_job,
    outcome,
    report,
    state_of,
    sweep,
)

LATER = T0 + timedelta(seconds=5)


def child_of(store, *parents, run_on=RunOn.SUCCESS, **fields):
    new = new_job(**fields)
    from dataclasses import replace

    new = replace(new, parents=tuple(parents), run_on=run_on)
    return store.enqueue([new], now=T0, max_payload_bytes=MAX_PAYLOAD)[0]


def finish(store, job_id, kind=OutcomeKind.SUCCEEDED, *, now=T0, max_attempts=None):
    """Claim the due jobs of the queue until ``job_id`` is leased, and report it."""
    leased = claim(store, max_jobs=100, now=now)
    assert job_id in [j.id for j in leased], f"job {job_id} was not claimable"
    others = [outcome(j, OutcomeKind.RELEASED) for j in leased if j.id != job_id]  # given back, not counted
    mine = [outcome(j, kind, max_attempts=max_attempts) for j in leased if j.id == job_id]
    report(store, *mine, *others, now=now)


def test_a_child_waits_until_its_parent_succeeds(store):
    parent = enqueue_one(store)
    child = child_of(store, parent.id)
    assert (child.state, child.parents_remaining) == (State.AWAITING_PARENT, 1)
    assert job(store, child.id).state is State.AWAITING_PARENT
    assert [c.id for c in claim(store, max_jobs=10)] == [parent.id]  # the child is not claimable

    leased = store.get_lease(parent.id)
    report(store, outcome_of(store, parent.id), now=T0)

    assert leased is not None
    view = job(store, child.id)
    assert (view.state, view.parents_remaining, view.run_on) == (State.SCHEDULED, 0, RunOn.SUCCESS)
    [edge] = store.list_edges(child.id)
    assert (edge.parent_id, edge.child_id, edge.resolution) == (parent.id, child.id, Resolution.RELEASED)
    assert edge.resolved_at == T0
    assert store.list_edges(parent.id) == [edge]


def outcome_of(store, job_id, kind=OutcomeKind.SUCCEEDED, attempt=None):
    from backwave_django.core.records import OutcomeReport

    lease = store.get_lease(job_id)
    view = job(store, job_id)
    return OutcomeReport(
        job_id=job_id,
        attempt=attempt or lease.attempt,
        kind=kind,
        max_attempts=view.max_attempts,
        message="x",
    )


def test_a_diamond_starts_its_join_only_after_both_branches(store):
    top = enqueue_one(store)
    left, right = child_of(store, top.id), child_of(store, top.id)
    join = child_of(store, left.id, right.id)
    finish(store, top.id)
    assert state_of(store, left.id) is state_of(store, right.id) is State.SCHEDULED
    finish(store, left.id)
    assert (job(store, join.id).state, job(store, join.id).parents_remaining) == (State.AWAITING_PARENT, 1)
    finish(store, right.id)
    assert state_of(store, join.id) is State.SCHEDULED


def test_a_failed_parent_cancels_a_success_child_and_the_cascade_goes_three_levels_down(store):
    parent = enqueue_one(store, max_attempts=1)
    child = child_of(store, parent.id, max_attempts=1)
    grandchild = child_of(store, child.id)
    great = child_of(store, grandchild.id)
    tolerant = child_of(store, grandchild.id, run_on=RunOn.ANY)

    finish(store, parent.id, OutcomeKind.FAILED)

    assert state_of(store, parent.id) is State.DEAD_LETTERED
    assert job(store, child.id).terminal_cause == f"parent {parent.id} ended dead_lettered"
    assert job(store, grandchild.id).terminal_cause == f"parent {child.id} ended cancelled"
    assert job(store, great.id).terminal_cause == f"parent {grandchild.id} ended cancelled"
    assert state_of(store, great.id) is State.CANCELLED
    assert state_of(store, tolerant.id) is State.SCHEDULED  # any: a cancelled parent is still finished


def test_an_any_child_runs_after_a_failed_parent(store):
    parent = enqueue_one(store, max_attempts=1)
    child = child_of(store, parent.id, run_on=RunOn.ANY)
    finish(store, parent.id, OutcomeKind.UNROUTABLE)
    assert state_of(store, parent.id) is State.QUARANTINED
    assert state_of(store, child.id) is State.SCHEDULED
    assert store.list_edges(child.id)[0].resolution is Resolution.RELEASED


def test_a_parent_already_finished_resolves_the_edge_at_once(store):
    done = job_in_state(store, State.SUCCEEDED)
    failed = job_in_state(store, State.DEAD_LETTERED)
    ready = child_of(store, done)
    assert (ready.state, job(store, ready.id).state) == (State.SCHEDULED, State.SCHEDULED)
    doomed = child_of(store, done, failed)
    assert doomed.state is State.CANCELLED
    assert job(store, doomed.id).terminal_cause == f"parent {failed} ended dead_lettered"
    assert {e.resolution for e in store.list_edges(doomed.id)} == {Resolution.RELEASED, Resolution.CANCELLED}


def test_an_unknown_parent_is_refused_and_nothing_is_written(store):
    parent = enqueue_one(store)
    with pytest.raises(UnknownParent, match=str(UNKNOWN_ID)) as error:
        store.enqueue(
            [new_job(), _with(new_job(), parents=(parent.id, UNKNOWN_ID))],
            now=T0,
            max_payload_bytes=MAX_PAYLOAD,
        )
    assert error.value.missing == (UNKNOWN_ID,)
    assert store.get_job(parent.id + 1) is None
    assert store.list_edges(parent.id) == []


def _with(new, **fields):
    from dataclasses import replace

    return replace(new, **fields)


def test_too_many_parents_or_a_bad_rule_are_refused(store):
    with pytest.raises(StoreError, match=f"at most {MAX_PARENTS} parents"):
        store.enqueue(
            [_with(new_job(), parents=tuple(range(1, MAX_PARENTS + 2)))],
            now=T0,
            max_payload_bytes=MAX_PAYLOAD,
        )
    with pytest.raises(StoreError, match="run_on must be one of"):
        store.enqueue(
            [_with(new_job(), parents=(1,), run_on="sometimes")], now=T0, max_payload_bytes=MAX_PAYLOAD
        )


def test_a_stale_attempt_never_releases_children(store):
    parent = enqueue_one(store)
    child = child_of(store, parent.id)
    first = claim_one(store, now=T0)
    sweep(store, now=T0 + LEASE + timedelta(seconds=1))  # its lease lapsed: scheduled again
    second = claim_one(store, worker=OTHER_WORKER, now=T0 + LEASE + timedelta(seconds=10))

    result = report(store, outcome(first, OutcomeKind.SUCCEEDED), now=T0 + LEASE + timedelta(seconds=11))

    assert result.stale == {parent.id}
    assert state_of(store, child.id) is State.AWAITING_PARENT
    assert store.list_edges(child.id)[0].resolved_at is None
    report(
        store,
        outcome(second, OutcomeKind.SUCCEEDED),
        worker=OTHER_WORKER,
        now=T0 + LEASE + timedelta(seconds=12),
    )
    assert state_of(store, child.id) is State.SCHEDULED


def test_an_expired_lease_at_the_ceiling_cancels_the_children(store):
    parent = enqueue_one(store, max_attempts=1)
    child = child_of(store, parent.id)
    claim_one(store, now=T0)
    sweep(store, now=T0 + LEASE + timedelta(seconds=1))
    assert state_of(store, parent.id) is State.DEAD_LETTERED
    assert state_of(store, child.id) is State.CANCELLED


def test_an_operator_cancel_of_a_parent_cascades_and_a_cancelled_child_keeps_its_state(store):
    parent = enqueue_one(store)
    other = enqueue_one(store)
    child = child_of(store, parent.id, other.id)
    grandchild = child_of(store, child.id)
    assert store.cancel(parent.id, actor="ops", now=T0).value == "cancelled"
    assert state_of(store, child.id) is state_of(store, grandchild.id) is State.CANCELLED

    finish(store, other.id)  # its edge resolves; the child stays cancelled
    assert state_of(store, child.id) is State.CANCELLED
    assert all(e.resolved_at is not None for e in store.list_edges(child.id))


def test_an_operator_cancel_of_a_waiting_child_cascades_to_its_children(store):
    parent = enqueue_one(store)
    child = child_of(store, parent.id)
    grandchild = child_of(store, child.id)
    store.cancel(child.id, actor="ops", now=T0)
    assert state_of(store, grandchild.id) is State.CANCELLED
    finish(store, parent.id)
    assert state_of(store, child.id) is State.CANCELLED


def test_requeueing_a_dead_lettered_parent_does_not_reopen_what_it_cancelled(store):
    parent = enqueue_one(store, max_attempts=1)
    child = child_of(store, parent.id)
    finish(store, parent.id, OutcomeKind.FAILED)
    assert store.requeue(parent.id, actor="ops", now=LATER).value == "requeued"
    finish(store, parent.id, now=LATER)

    assert state_of(store, parent.id) is State.SUCCEEDED
    assert state_of(store, child.id) is State.CANCELLED
    assert job(store, child.id).terminal_cause == f"parent {parent.id} ended dead_lettered"
    [edge] = store.list_edges(child.id)
    assert (edge.resolution, edge.resolved_at) == (Resolution.CANCELLED, T0)  # resolved once, never again


def test_a_fan_in_of_many_parents_starts_once_the_last_one_ends(store):
    parents = [
        e.id for e in store.enqueue([new_job() for _ in range(50)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    ]
    child = child_of(store, *parents)
    leased = claim(store, max_jobs=100)
    report(store, *[outcome(j, OutcomeKind.SUCCEEDED) for j in leased if j.id != parents[-1]])
    assert job(store, child.id).parents_remaining == 1
    [last] = [j for j in leased if j.id == parents[-1]]
    report(store, outcome(last, OutcomeKind.SUCCEEDED))
    assert state_of(store, child.id) is State.SCHEDULED


def test_retention_keeps_a_parent_an_unfinished_child_depends_on(store):
    parent = job_in_state(store, State.SUCCEEDED)
    loner = job_in_state(store, State.SUCCEEDED)
    child = child_of(store, parent)
    rule = PurgeRule(queues=("default",), states=(State.SUCCEEDED,), before=T0 + timedelta(days=1))

    assert store.purge([rule], max_jobs=100) == 1
    assert store.get_job(loner) is None and store.get_job(parent) is not None

    finish(store, child.id)
    assert store.purge([rule], max_jobs=100) == 2  # both ends, and their edge, go
    assert store.list_edges(child.id) == []
