"""The dependency rules: a child's birth from its parents' states, and what resolving edges does to it."""

from __future__ import annotations

import pytest

from backwave_django.core import dependencies as deps
from backwave_django.core.dependencies import Edge, Resolution, RunOn, Waiting
from backwave_django.core.states import State as S

MAX_ID = 2**63 - 1


@pytest.mark.parametrize(
    ("state", "run_on", "expected"),
    [
        (S.SCHEDULED, RunOn.SUCCESS, None),
        (S.LEASED, RunOn.ANY, None),
        (S.AWAITING_PARENT, RunOn.SUCCESS, None),
        (S.SUCCEEDED, RunOn.SUCCESS, Resolution.RELEASED),
        (S.SUCCEEDED, RunOn.ANY, Resolution.RELEASED),
        (S.DEAD_LETTERED, RunOn.SUCCESS, Resolution.CANCELLED),
        (S.QUARANTINED, RunOn.SUCCESS, Resolution.CANCELLED),
        (S.CANCELLED, RunOn.SUCCESS, Resolution.CANCELLED),
        (S.DEAD_LETTERED, RunOn.ANY, Resolution.RELEASED),
        (S.QUARANTINED, RunOn.ANY, Resolution.RELEASED),
        (S.CANCELLED, RunOn.ANY, Resolution.RELEASED),
    ],
)
def test_a_parent_resolves_an_edge_only_once_terminal(state, run_on, expected):
    assert deps.resolution(state, run_on) is expected


def test_a_child_with_running_parents_is_born_waiting_on_each():
    born = deps.start({1: S.SCHEDULED, 2: S.LEASED}, RunOn.SUCCESS)
    assert (born.state, born.parents_remaining, born.cause, dict(born.resolved)) == (
        S.AWAITING_PARENT,
        2,
        "",
        {},
    )


def test_a_child_whose_parents_all_finished_is_born_scheduled():
    born = deps.start({1: S.SUCCEEDED, 2: S.DEAD_LETTERED}, RunOn.ANY)
    assert (born.state, born.parents_remaining) == (S.SCHEDULED, 0)
    assert dict(born.resolved) == {1: Resolution.RELEASED, 2: Resolution.RELEASED}


def test_a_success_child_of_a_failed_parent_is_born_cancelled_naming_the_lowest_failed_parent():
    born = deps.start({3: S.QUARANTINED, 2: S.DEAD_LETTERED, 1: S.SCHEDULED}, RunOn.SUCCESS)
    assert born.state is S.CANCELLED
    assert born.cause == "parent 2 ended dead_lettered"
    assert born.parents_remaining == 1


def test_born_states_are_initial_states():
    from backwave_django.core.states import INITIAL_STATES

    for parents in ({1: S.SCHEDULED}, {1: S.SUCCEEDED}, {1: S.CANCELLED}, {}):
        assert deps.start(parents, RunOn.SUCCESS).state in INITIAL_STATES


@pytest.mark.parametrize(
    ("parents", "run_on", "problem"),
    [
        ((1, 2), "success", "run_on must be one of 'success', 'any'"),
        ([1], RunOn.ANY, "parents must be a tuple of job ids, got list"),
        ((0,), RunOn.ANY, "a parent must be a job id"),
        ((True,), RunOn.ANY, "a parent must be a job id"),
        (("7",), RunOn.ANY, "a parent must be a job id"),
        ((MAX_ID + 1,), RunOn.ANY, "a parent must be a job id"),
        (tuple(range(1, deps.MAX_PARENTS + 2)), RunOn.ANY, "at most 1000 parents, got 1001"),
    ],
)
def test_bad_parents_are_named(parents, run_on, problem):
    found = deps.parents_problem(parents, run_on, max_job_id=MAX_ID)
    assert found is not None and problem in found


def test_good_parents_have_no_problem():
    many = (*range(1, deps.MAX_PARENTS + 1), 1)  # a repeated parent counts once
    assert deps.parents_problem(many, RunOn.SUCCESS, max_job_id=MAX_ID) is None


def _waiting(remaining: int, run_on: RunOn = RunOn.SUCCESS, state: S = S.AWAITING_PARENT) -> Waiting:
    return Waiting(state=state, run_on=run_on, parents_remaining=remaining)


def test_the_last_parent_to_succeed_schedules_the_child():
    edges = [Edge(parent_id=1, child_id=9, parent_state=S.SUCCEEDED),
             Edge(parent_id=2, child_id=9, parent_state=S.SUCCEEDED)]  # fmt: skip
    done = deps.resolve(edges, {9: _waiting(2)})
    (move,) = done.children
    assert (move.before, move.state, move.parents_remaining, move.changed_state) == (
        S.AWAITING_PARENT,
        S.SCHEDULED,
        0,
        True,
    )
    assert done.edges == {(1, 9): Resolution.RELEASED, (2, 9): Resolution.RELEASED}
    assert done.cancelled == []


def test_one_parent_of_several_only_counts_down():
    done = deps.resolve([Edge(parent_id=1, child_id=9, parent_state=S.SUCCEEDED)], {9: _waiting(3)})
    (move,) = done.children
    assert (move.state, move.parents_remaining, move.changed_state) == (S.AWAITING_PARENT, 2, False)


def test_a_failed_parent_cancels_a_success_child_and_later_edges_only_count():
    edges = [Edge(parent_id=2, child_id=9, parent_state=S.SUCCEEDED),
             Edge(parent_id=1, child_id=9, parent_state=S.DEAD_LETTERED)]  # fmt: skip
    done = deps.resolve(edges, {9: _waiting(3)})
    (move,) = done.children
    assert (move.state, move.parents_remaining, move.cause) == (
        S.CANCELLED,
        1,
        "parent 1 ended dead_lettered",
    )
    assert done.cancelled == [9]
    assert done.edges[1, 9] is Resolution.CANCELLED and done.edges[2, 9] is Resolution.RELEASED


def test_an_any_child_starts_after_a_failed_parent():
    done = deps.resolve(
        [Edge(parent_id=1, child_id=9, parent_state=S.CANCELLED)], {9: _waiting(1, RunOn.ANY)}
    )
    assert done.children[0].state is S.SCHEDULED


def test_a_child_no_longer_waiting_keeps_its_state():
    child = _waiting(1, state=S.CANCELLED)
    done = deps.resolve([Edge(parent_id=1, child_id=9, parent_state=S.SUCCEEDED)], {9: child})
    (move,) = done.children
    assert (move.state, move.parents_remaining, move.changed_state) == (S.CANCELLED, 0, False)
    assert done.cancelled == []


def test_an_edge_of_a_running_parent_is_refused():
    with pytest.raises(deps.IllegalDependencyMove, match="parent 1 is leased"):
        deps.resolve([Edge(parent_id=1, child_id=9, parent_state=S.LEASED)], {9: _waiting(1)})


def test_a_move_the_transitions_forbid_is_refused(monkeypatch):
    monkeypatch.setattr(deps, "is_legal", lambda before, after: False)
    with pytest.raises(deps.IllegalDependencyMove, match="from awaiting_parent to scheduled"):
        deps.resolve([Edge(parent_id=1, child_id=9, parent_state=S.SUCCEEDED)], {9: _waiting(1)})
