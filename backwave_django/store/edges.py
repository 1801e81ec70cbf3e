"""Job dependencies in the Django stores (mixed into ``DjangoStore``): writing a child's edges with it, and
resolving them in each parent's terminal transaction, cascading down.

Locking. Every path locks job rows in ascending id order, and a child is always newer (a higher id) than its
parents, so "parents before children" is ascending order too:

- an enqueue with parents locks the parents (``FOR UPDATE``, ascending) before it writes the child;
- a transaction that ends Attempts (a report, the expiry sweep) first takes the leases it ends, then locks
  those jobs together with their unresolved direct children in one ``SELECT ... ORDER BY id FOR UPDATE``,
  and only then updates them (never relying on the row order of an UPDATE);
- a cancellation cascade locks each further level of children in ascending order.

So an enqueue never deadlocks with a parent's report. Two reports can still meet when a cascade reaches a
second level (a grandchild may be older than a job the other report locked first); the database breaks that
by rolling one back, and the store runs it again (``store.deadlocks``).

The edges a parent resolves are read after its row is locked, so a child enqueued concurrently either
committed before (its edge is seen and resolved) or waits for the parent's transaction and then sees it
terminal (its edge resolves at once). Each edge resolves exactly once: its update is guarded by
``resolved_at IS NULL``. Decisions come from ``core.dependencies`` through ``store.changes``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import F, Q

from ..core.dependencies import ChildMove, Edge, Resolution, RunOn, Start, Waiting
from ..core.states import State
from ..models import Dependency, Job
from . import announced, changes
from .contract import EdgeView, EnqueuedJob, NewJob, UnknownParent

_CHILD_FIELDS = ("id", "state", "run_on", "parents_remaining", "has_children", "queue")
_EDGE_FIELDS = ("parent_id", "child_id", "parent__state", "child__state", "resolved_at", "resolution")


class DependencyMixin:
    """Edges through the ORM (they are rare next to plain jobs: the hot paths pay one lookup per batch)."""

    using: str

    if TYPE_CHECKING:  # provided by DjangoStore

        def _hint_other_processes(self, queues: Sequence[str]) -> None: ...

        def _hint_this_process(self, queues: Sequence[str]) -> None: ...

        def _announce(self, build: Callable[[], list[announced.Transition]]) -> None: ...

    # -- enqueue ------------------------------------------------------------------------------------

    def _lock_parents(self, jobs: Sequence[NewJob]) -> dict[int, State]:
        """Lock every parent named in ``jobs`` (ascending id), mark them as having children, and return their
        states. Raises :class:`UnknownParent` naming the ids that do not exist (nothing is written)."""
        wanted = sorted({parent for new in jobs for parent in new.parents})
        if not wanted:
            return {}
        found = Job.objects.using(self.using).filter(id__in=wanted).order_by("id").select_for_update()
        rows = list(found.values_list("id", "state", "has_children"))
        missing = set(wanted) - {row[0] for row in rows}
        if missing:
            raise UnknownParent(sorted(missing))
        lacking = [job_id for job_id, _, has in rows if not has]
        if lacking:
            Job.objects.using(self.using).filter(id__in=lacking).update(has_children=True)
        return {job_id: State(state) for job_id, state, _ in rows}

    def _write_edges(
        self, jobs: Sequence[NewJob], done: list[EnqueuedJob], parents: Mapping[int, State], now: datetime
    ) -> list[EnqueuedJob]:
        """Give each new job with parents its birth state and its edges; returns ``done`` with the states."""
        starts: dict[int, Start] = {}
        edges = []
        for new, result in zip(jobs, done, strict=True):
            if result.duplicate or not new.parents:
                continue
            mine = dict.fromkeys(sorted(set(new.parents)))
            start = starts[result.id] = changes.child_start({p: parents[p] for p in mine}, new.run_on)
            for parent in mine:
                resolution = start.resolved.get(parent)
                edges.append(
                    Dependency(
                        parent_id=parent,
                        child_id=result.id,
                        resolved_at=None if resolution is None else now,
                        resolution="" if resolution is None else resolution,
                    )
                )
        if not starts:
            return done
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        run_on = {result.id: new.run_on for new, result in zip(jobs, done, strict=True)}
        for job_id, start in starts.items():
            groups[start.state, start.parents_remaining, start.cause, run_on[job_id]].append(job_id)
        for (state, remaining, cause, rule), ids in groups.items():
            values: dict[str, Any] = {"state": state, "parents_remaining": remaining, "run_on": rule}
            if state.is_terminal:
                values.update(terminal_at=now, terminal_cause=cause)
            Job.objects.using(self.using).filter(id__in=ids).update(**values)
        Dependency.objects.using(self.using).bulk_create(edges, batch_size=5000)
        return [
            result
            if result.id not in starts
            else EnqueuedJob(
                id=result.id,
                state=starts[result.id].state,
                parents_remaining=starts[result.id].parents_remaining,
                terminal_cause=starts[result.id].cause,
            )
            for result in done
        ]

    # -- a parent's terminal transaction --------------------------------------------------------------

    def _lock_with_children(self, ids: Sequence[int]) -> set[int]:
        """Lock these jobs (whose leases the caller holds) and their unresolved direct children, in one
        statement, ascending id. Returns which of ``ids`` have children."""
        if not ids:
            return set()
        unresolved = Dependency.objects.using(self.using).filter(parent_id__in=ids, resolved_at__isnull=True)
        # The children are read first and the rows locked by id: a filter of two INs joined by OR would test
        # every row of the job table, finished ones included, on every report. A child enqueued meanwhile
        # is no worse off than with one statement, whose subquery read the edges before its locks were
        # granted: the cascade reads the edges again once the parents are locked.
        children = list(unresolved.values_list("child_id", flat=True))
        rows = (
            Job.objects.using(self.using)
            .filter(id__in=sorted({*ids, *children}))
            .order_by("id")
            .select_for_update()
            .values_list("id", "has_children")
        )
        wanted = set(ids)
        return {job_id for job_id, has in rows if has and job_id in wanted}

    def _resolve_children(self, ended: Mapping[int, State], now: datetime) -> None:
        """Resolve every unresolved edge of these parents, which have just reached the terminal states
        given (only parents that have children need be passed), and go on down the cascade: a child
        cancelled here resolves its own children's edges in the same transaction."""
        frontier = dict(ended)
        while frontier:
            unresolved = Dependency.objects.using(self.using).filter(
                parent_id__in=list(frontier), resolved_at__isnull=True
            )
            edges = list(unresolved.values_list("id", "parent_id", "child_id"))
            if not edges:
                return
            child_ids = sorted({child for _, _, child in edges})
            locked = Job.objects.using(self.using).filter(id__in=child_ids).order_by("id").select_for_update()
            rows = list(
                locked.values_list(
                    "id", "state", "run_on", "parents_remaining", "has_children", "queue", "wire_name"
                )
            )
            children = {
                job_id: Waiting(state=State(state), run_on=RunOn(run_on), parents_remaining=remaining)
                for job_id, state, run_on, remaining, *_ in rows
            }
            decided = changes.resolve_edges(
                [Edge(parent_id=p, child_id=c, parent_state=frontier[p]) for _, p, c in edges], children
            )
            by_resolution: dict[Resolution, list[int]] = defaultdict(list)
            for edge_id, parent, child in edges:
                by_resolution[decided.edges[parent, child]].append(edge_id)
            for resolution, edge_ids in by_resolution.items():
                Dependency.objects.using(self.using).filter(id__in=edge_ids, resolved_at__isnull=True).update(
                    resolved_at=now, resolution=resolution
                )
            names = {job_id: (wire_name, queue) for job_id, *_, queue, wire_name in rows}
            self._move_children(decided.children, children, names, now)
            parents_of_more = {job_id for job_id, _, _, _, has, *_ in rows if has}
            frontier = {c: State.CANCELLED for c in decided.cancelled if c in parents_of_more}

    def _move_children(
        self,
        moves: Sequence[ChildMove],
        children: Mapping[int, Waiting],
        names: Mapping[int, tuple[str, str]],
        now: datetime,
    ) -> None:
        """Write the children's moves, one UPDATE per distinct change (a fan-out's children share one);
        ``names``: each child's (wire name, queue)."""
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for move in moves:
            delta = children[move.child_id].parents_remaining - move.parents_remaining
            groups[move.before, move.state, move.cause, delta].append(move.child_id)
        jobs = Job.objects.using(self.using)
        for (before, state, cause, delta), ids in groups.items():
            values: dict[str, Any] = {"parents_remaining": F("parents_remaining") - delta}
            if state is not before:
                values["state"] = state
                if state.is_terminal:
                    values.update(terminal_at=now, terminal_cause=cause)
            jobs.filter(id__in=ids, state=before).update(**values)
        self._announce(lambda: _child_moves(moves, names))
        started = sorted(
            {names[m.child_id][1] for m in moves if m.changed_state and m.state is State.SCHEDULED}
        )
        if started:
            self._hint_other_processes(started)
            self._hint_this_process(started)

    # -- reads --------------------------------------------------------------------------------------

    def list_edges(self, job_id: int) -> list[EdgeView]:
        rows = (
            Dependency.objects.using(self.using)
            .filter(Q(parent_id=job_id) | Q(child_id=job_id))
            .order_by("parent_id", "child_id")
            .values_list(
                "parent_id", "child_id", "parent__state", "child__state", "resolved_at", "resolution"
            )
        )
        return [
            EdgeView(
                parent_id=parent,
                child_id=child,
                parent_state=State(parent_state),
                child_state=State(child_state),
                resolved_at=resolved_at,
                resolution=Resolution(resolution) if resolution else None,
            )
            for parent, child, parent_state, child_state, resolved_at, resolution in rows
        ]


def _child_moves(
    moves: Sequence[ChildMove], names: Mapping[int, tuple[str, str]]
) -> list[announced.Transition]:
    """The children whose state a resolution changed, as ``job_transitioned`` says it (a waiting child has
    run no Attempt; its cause is the one it ended with, if it ended)."""
    return [
        announced.Transition(
            job_id=move.child_id,
            wire_name=names[move.child_id][0],
            queue=names[move.child_id][1],
            from_state=move.before,
            to_state=move.state,
            attempt=0,
            cause=move.cause if move.state.is_terminal else "",
            operation="resolve",
        )
        for move in moves
        if move.changed_state
    ]
