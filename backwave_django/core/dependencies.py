"""Job dependencies: when a child waits, starts or is cancelled because of its parents.

A child is enqueued with its parents' ids and a :class:`RunOn` rule. Each (parent, child) pair is an edge,
which resolves exactly once: when its parent reaches a terminal state (inside that transaction), or at once
when the parent is terminal already as the child is written. This module decides, from plain facts, the
child's state at birth (:func:`start`) and what one batch of resolved edges does to waiting children
(:func:`resolve`); every store consumes it, none decides for itself.

Cycles cannot happen: a parent must exist when its child is written, and a job's parents never change
afterwards, so every edge points from an older job to a newer one (ids grow with time).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence

from .states import State, is_legal
from .values import value

#: The most parents one job may have (the edges are written with the child, in its transaction).
MAX_PARENTS = 1000
#: The most jobs one call of ``chain``/``group`` (one graph, one transaction) may enqueue.
MAX_GRAPH_JOBS = 10_000


class RunOn(enum.StrEnum):
    """When a child may start: once every parent succeeded, or once every parent is terminal."""

    SUCCESS = "success"
    ANY = "any"


class Resolution(enum.StrEnum):
    """What a resolved edge did: its parent let the child go on, or (``success`` only) cancelled it."""

    RELEASED = "released"
    CANCELLED = "cancelled"


#: The parent states a ``success`` child cannot start after.
_FAILED = frozenset({State.DEAD_LETTERED, State.QUARANTINED, State.CANCELLED})


def resolution(parent_state: State, run_on: RunOn) -> Resolution | None:
    """What a parent in ``parent_state`` means for a child waiting with ``run_on``; None while it runs."""
    if not parent_state.is_terminal:
        return None
    if run_on is RunOn.SUCCESS and parent_state in _FAILED:
        return Resolution.CANCELLED
    return Resolution.RELEASED


def cancel_cause(parent_id: int, parent_state: State) -> str:
    """The terminal cause of a child cancelled by its parent: it names the parent."""
    return f"parent {parent_id} ended {parent_state}"


def parents_problem(parents: object, run_on: object, *, max_job_id: int) -> str | None:
    """Why these parents and this rule cannot be stored, or None when they can."""
    if not isinstance(run_on, RunOn):
        choices = ", ".join(repr(r.value) for r in RunOn)
        return f"run_on must be one of {choices}, got {run_on!r}"
    if not isinstance(parents, tuple):
        return f"parents must be a tuple of job ids, got {type(parents).__name__}"
    for parent in parents:
        if isinstance(parent, bool) or not isinstance(parent, int) or not 1 <= parent <= max_job_id:
            return f"a parent must be a job id (an int from 1 to {max_job_id}), got {parent!r}"
    if len(set(parents)) > MAX_PARENTS:
        return f"a job may have at most {MAX_PARENTS} parents, got {len(set(parents))}"
    return None


@value
class Start:
    """How a child is born: its state, the edges still open, its cause, and the edges resolved at once."""

    state: State
    parents_remaining: int
    cause: str
    resolved: Mapping[int, Resolution]  # parent id -> resolution, for parents terminal already


def start(parents: Mapping[int, State], run_on: RunOn) -> Start:
    """A child's birth from its parents' states now. With no parent left running it is scheduled at once;
    under ``success``, a parent that failed already has it born cancelled (the lowest such id is named)."""
    resolved = {pid: r for pid, state in parents.items() if (r := resolution(state, run_on)) is not None}
    failed = sorted(pid for pid, r in resolved.items() if r is Resolution.CANCELLED)
    remaining = len(parents) - len(resolved)
    if failed:
        return Start(
            state=State.CANCELLED,
            parents_remaining=remaining,
            cause=cancel_cause(failed[0], parents[failed[0]]),
            resolved=resolved,
        )
    state = State.AWAITING_PARENT if remaining else State.SCHEDULED
    return Start(state=state, parents_remaining=remaining, cause="", resolved=resolved)


@value
class Waiting:
    """A child as a store read it (row locked) before its edges resolve."""

    state: State
    run_on: RunOn
    parents_remaining: int


@value
class Edge:
    """One edge to resolve now: its parent has just reached ``parent_state``."""

    parent_id: int
    child_id: int
    parent_state: State


@value
class ChildMove:
    """What resolving its edges does to one child: its new state (unchanged if it was not waiting), the
    edges still open, and the cause (a cancelled child's)."""

    child_id: int
    before: State
    state: State
    parents_remaining: int
    cause: str

    @property
    def changed_state(self) -> bool:
        return self.state is not self.before


class IllegalDependencyMove(RuntimeError):
    """A child move that ``states.TRANSITIONS`` does not allow: a bug, never written."""


@value
class Resolved:
    """One batch decided: each edge's resolution (by (parent, child)) and each child's move."""

    edges: Mapping[tuple[int, int], Resolution]
    children: Sequence[ChildMove]

    @property
    def cancelled(self) -> list[int]:
        """Children this batch cancelled: their own children resolve next (the cascade goes on down)."""
        return [m.child_id for m in self.children if m.changed_state and m.state is State.CANCELLED]


def resolve(edges: Iterable[Edge], children: Mapping[int, Waiting]) -> Resolved:
    """Resolve ``edges`` (each exactly once) against their children as read. A child that is no longer
    waiting (an operator or another parent cancelled it) keeps its state: the edge resolves, nothing moves.
    Edges are taken by (child, parent) id, so the cause names the lowest failed parent."""
    decided: dict[tuple[int, int], Resolution] = {}
    moves: dict[int, ChildMove] = {}
    for edge in sorted(edges, key=lambda e: (e.child_id, e.parent_id)):
        child = children[edge.child_id]
        outcome = resolution(edge.parent_state, child.run_on)
        if outcome is None:
            raise IllegalDependencyMove(f"parent {edge.parent_id} is {edge.parent_state}: nothing to resolve")
        decided[edge.parent_id, edge.child_id] = outcome
        current = moves.get(edge.child_id) or ChildMove(
            child_id=edge.child_id,
            before=child.state,
            state=child.state,
            parents_remaining=child.parents_remaining,
            cause="",
        )
        moves[edge.child_id] = _step(current, edge, outcome)
    for move in moves.values():
        if move.changed_state and not is_legal(move.before, move.state):
            raise IllegalDependencyMove(f"a child cannot move from {move.before} to {move.state}")
    return Resolved(edges=decided, children=list(moves.values()))


def _step(move: ChildMove, edge: Edge, outcome: Resolution) -> ChildMove:
    remaining = max(0, move.parents_remaining - 1)
    if move.state is not State.AWAITING_PARENT:  # not waiting any more: only the count moves
        return ChildMove(
            child_id=move.child_id,
            before=move.before,
            state=move.state,
            parents_remaining=remaining,
            cause=move.cause,
        )
    if outcome is Resolution.CANCELLED:
        state, cause = State.CANCELLED, cancel_cause(edge.parent_id, edge.parent_state)
    else:
        state, cause = (State.AWAITING_PARENT if remaining else State.SCHEDULED), ""
    return ChildMove(
        child_id=move.child_id, before=move.before, state=state, parents_remaining=remaining, cause=cause
    )
