"""The invariants of job dependencies (issue 16): a child starts only after its parents, each edge resolves
exactly once, and no child waits for ever on a parent that has finished.

The watch reads a job's edges from the store (``list_edges``, under the store's lock, from inside its
``observe`` hook) only for jobs that have parents or children, so runs without dependencies pay nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.dependencies import RunOn
from ..core.states import State
from ..store.contract import EdgeView, JobView
from ..store.memory import JobChange

if TYPE_CHECKING:
    from .invariants import Checker


class DependencyWatch:
    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self.edges: Callable[[int], list[EdgeView]] = lambda job_id: []
        self.with_parents: set[int] = set()  # jobs born with parents
        self.released = 0  # children that left awaiting_parent for scheduled, for the tests and the summary

    def changed(self, change: JobChange, after: JobView) -> None:
        before = change.before
        if before is None:  # born: its edges are written with it
            parents = self._parents(after.id)
            if not parents:
                return
            self.with_parents.add(after.id)
        elif after.id in self.with_parents:
            parents = self._parents(after.id)
        else:
            return
        self._counted(after, parents)
        if after.state is State.SCHEDULED and (before is None or before.state is State.AWAITING_PARENT):
            self._may_start(after, parents)

    def _parents(self, job_id: int) -> list[EdgeView]:
        return [edge for edge in self.edges(job_id) if edge.child_id == job_id]

    def _counted(self, after: JobView, parents: list[EdgeView]) -> None:
        """Each edge resolves once: a job waits on exactly its unresolved edges."""
        open_edges = sum(1 for edge in parents if edge.resolved_at is None)
        self.checker.expect(
            after.parents_remaining == open_edges,
            "EdgeResolvedOnce",
            lambda: f"job {after.id} waits on {after.parents_remaining} parents; {open_edges} edges are open",
        )

    def _may_start(self, after: JobView, parents: list[EdgeView]) -> None:
        """A child leaves awaiting_parent (or is born scheduled) only once every parent is finished, and,
        under ``success``, succeeded."""
        self.released += 1
        unfit = [
            f"{edge.parent_id}:{edge.parent_state}"
            for edge in parents
            if not edge.parent_state.is_terminal
            or (after.run_on is RunOn.SUCCESS and edge.parent_state is not State.SUCCEEDED)
        ]
        self.checker.expect(
            not unfit,
            "ChildAfterParents",
            lambda: f"job {after.id} ({after.run_on}) was scheduled while its parents were {unfit}",
        )

    def audit(self, stored: list[JobView]) -> None:
        """At the end of a run: no child waits on a parent that has finished."""
        for job in stored:
            if job.id not in self.with_parents:
                continue
            parents = self._parents(job.id)
            finished = [e.parent_id for e in parents if e.parent_state.is_terminal and e.resolved_at is None]
            self.checker.expect(
                not finished,
                "NoChildWaitsForever",
                lambda job=job, finished=finished: (  # type: ignore[misc]
                    f"job {job.id} ({job.state}) still waits on finished parents {finished}"
                ),
            )
            self._counted(job, parents)
