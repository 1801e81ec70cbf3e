"""Job dependencies in the in-memory store (mixed into ``MemoryStore``): the same decisions as the Django
stores (``core.dependencies`` through ``store.changes``), made under the store's one lock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from ..core.dependencies import Edge, Resolution, Waiting
from ..core.states import State
from . import changes
from .contract import EdgeView, JobView, NewJob, UnknownParent


@dataclass(slots=True)
class _EdgeRecord:
    resolved_at: datetime | None = None
    resolution: Resolution | None = None


class MemoryDependencyMixin:
    """Edges kept as (parent, child) -> record, with each job's children and parents."""

    _jobs: dict[int, JobView]
    _edges: dict[tuple[int, int], _EdgeRecord]
    _children: dict[int, list[int]]
    _parents: dict[int, list[int]]

    if TYPE_CHECKING:  # provided by MemoryStore

        def _put(self, job: JobView) -> None: ...

        def _observed(
            self, operation: str, now: datetime, before: JobView | None, after: JobView | None
        ) -> None: ...

    def _init_edges(self) -> None:
        self._edges = {}
        self._children = {}
        self._parents = {}

    def _parent_states(self, jobs: Sequence[NewJob]) -> dict[int, State]:
        """The states of every parent named; raises :class:`UnknownParent` before anything is written."""
        wanted = {parent for new in jobs for parent in new.parents}
        missing = sorted(p for p in wanted if p not in self._jobs)
        if missing:
            raise UnknownParent(missing)
        return {p: self._jobs[p].state for p in wanted}

    def _born(self, job: JobView, new: NewJob, parents: Mapping[int, State], now: datetime) -> JobView:
        """A new job with its parents' edges written: its birth state from them."""
        mine = sorted(set(new.parents))
        start = changes.child_start({p: parents[p] for p in mine}, new.run_on)
        for parent in mine:
            resolution = start.resolved.get(parent)
            self._edges[parent, job.id] = _EdgeRecord(None if resolution is None else now, resolution)
            self._children.setdefault(parent, []).append(job.id)
            self._parents.setdefault(job.id, []).append(parent)
        terminal = start.state.is_terminal
        return replace(
            job,
            state=start.state,
            run_on=new.run_on,
            parents_remaining=start.parents_remaining,
            terminal_at=now if terminal else None,
            terminal_cause=start.cause,
        )

    def _resolve_children(self, ended: Mapping[int, State], now: datetime) -> None:
        """Resolve the open edges of parents that just ended, cascading down through cancelled children.
        Each child's change is observed as the operation ``resolve`` (its count, and maybe its state)."""
        frontier = dict(ended)
        while frontier:
            edges = [
                Edge(parent_id=parent, child_id=child, parent_state=state)
                for parent, state in sorted(frontier.items())
                for child in self._children.get(parent, ())
                if self._edges[parent, child].resolved_at is None
            ]
            if not edges:
                return
            children = {
                e.child_id: Waiting(
                    state=(job := self._jobs[e.child_id]).state,
                    run_on=job.run_on,
                    parents_remaining=job.parents_remaining,
                )
                for e in edges
            }
            decided = changes.resolve_edges(edges, children)
            for (parent, child), resolution in decided.edges.items():
                self._edges[parent, child] = _EdgeRecord(now, resolution)
            for move in decided.children:
                before = self._jobs[move.child_id]
                after = replace(before, parents_remaining=move.parents_remaining)
                if move.changed_state:
                    after = replace(after, state=move.state)
                    if move.state.is_terminal:
                        after = replace(after, terminal_at=now, terminal_cause=move.cause)
                self._put(after)
                self._observed("resolve", now, before, after)
            frontier = {c: State.CANCELLED for c in decided.cancelled if self._children.get(c)}

    def _drop_edges(self, job_id: int) -> None:
        for parent in self._parents.pop(job_id, []):
            self._edges.pop((parent, job_id), None)
            if parent in self._children:
                self._children[parent].remove(job_id)
        for child in self._children.pop(job_id, []):
            self._edges.pop((job_id, child), None)
            if child in self._parents:
                self._parents[child].remove(job_id)

    def _waited_on(self, job_id: int) -> bool:
        """A child that has not finished still depends on this job (retention keeps it, and its output)."""
        return any(not self._jobs[child].state.is_terminal for child in self._children.get(job_id, ()))

    def list_edges(self, job_id: int) -> list[EdgeView]:
        with self._lock:  # type: ignore[attr-defined]
            pairs = [(p, job_id) for p in self._parents.get(job_id, ())]
            pairs += [(job_id, c) for c in self._children.get(job_id, ())]
            return [
                EdgeView(
                    parent_id=parent,
                    child_id=child,
                    parent_state=self._jobs[parent].state,
                    child_state=self._jobs[child].state,
                    resolved_at=self._edges[parent, child].resolved_at,
                    resolution=self._edges[parent, child].resolution,
                )
                for parent, child in sorted(pairs)
            ]
