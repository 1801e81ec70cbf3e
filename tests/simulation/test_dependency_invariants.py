"""The invariants of job dependencies, each tripped under its own name by a violation made by hand; a clean
graph trips nothing; and the scenarios really draw graphs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import pytest

from backwave_django.core.dependencies import RunOn
from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.core.states import State
from backwave_django.simulation.invariants import INVARIANTS, Checker, Violation
from backwave_django.simulation.scenario import draw
from backwave_django.store.memory import MemoryStore

from .test_feature_invariants import LEASE, RETRY, T0, WORKER, new


def observed(checker: Checker, store_class: type[MemoryStore] = MemoryStore) -> MemoryStore:
    store = store_class(observe=checker.on_change)
    checker.dependencies.edges = store.list_edges
    return store


def child(store: MemoryStore, *parents: int, run_on: RunOn = RunOn.SUCCESS) -> int:
    job = replace(new(queue="q1"), parents=parents, run_on=run_on)
    return store.enqueue([job], now=T0, max_payload_bytes=65536)[0].id


def end(checker: Checker, store: MemoryStore, job_id: int, kind: OutcomeKind = OutcomeKind.SUCCEEDED) -> None:
    checker.returned[WORKER, job_id, 1] = None  # its handler ran (and returned, for a success)
    [claimed] = store.claim(worker_id=WORKER, queues=["q0"], max_jobs=1, lease_duration=LEASE, now=T0)
    assert claimed.id == job_id
    report = OutcomeReport(job_id=job_id, attempt=1, kind=kind, max_attempts=1)
    store.report(worker_id=WORKER, reports=[report], retry=RETRY, now=T0)


def parent(store: MemoryStore) -> int:
    return store.enqueue([new()], now=T0, max_payload_bytes=65536)[0].id


class ReleasesOnFailure(MemoryStore):
    def _resolve_children(self, ended: dict[int, State], now: datetime) -> None:  # type: ignore[override]
        super()._resolve_children(dict.fromkeys(ended, State.SUCCEEDED), now)


def released_by_a_failure(checker: Checker) -> None:
    store = observed(checker, ReleasesOnFailure)
    first = parent(store)
    child(store, first)
    end(checker, store, first, OutcomeKind.FAILED)


class CountsTwice(MemoryStore):
    def _resolve_children(self, ended: dict[int, State], now: datetime) -> None:  # type: ignore[override]
        for child_id in [c for p in ended for c in self._children.get(p, ())]:
            job = self._jobs[child_id]
            self._put(replace(job, parents_remaining=max(0, job.parents_remaining - 1)))
            self._observed("resolve", now, job, self._jobs[child_id])
        super()._resolve_children(ended, now)


def resolved_twice(checker: Checker) -> None:
    store = observed(checker, CountsTwice)
    first, second = parent(store), parent(store)
    child(store, first, second)
    end(checker, store, first)


class ForgetsChildren(MemoryStore):
    def _resolve_children(self, ended: dict[int, State], now: datetime) -> None:  # type: ignore[override]
        return None


def waits_for_ever(checker: Checker) -> None:
    store = observed(checker, ForgetsChildren)
    first = parent(store)
    child(store, first)
    end(checker, store, first)
    checker.audit(store.all_jobs(), drained=False)


HAND_MADE: dict[str, Callable[[Checker], None]] = {
    "ChildAfterParents": released_by_a_failure,
    "EdgeResolvedOnce": resolved_twice,
    "NoChildWaitsForever": waits_for_ever,
}


def test_each_is_a_named_invariant():
    assert set(HAND_MADE) <= set(INVARIANTS)


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_a_dependency_invariant_trips_on_a_hand_made_violation(name):
    with pytest.raises(Violation) as raised:
        HAND_MADE[name](Checker(lambda: 0))
    assert raised.value.name == name


def test_a_clean_graph_trips_nothing():
    checker = Checker(lambda: 0)
    store = observed(checker)
    top = parent(store)
    strict, tolerant = child(store, top), child(store, top, run_on=RunOn.ANY)
    deeper = child(store, strict)
    end(checker, store, top, OutcomeKind.FAILED)
    checker.audit(store.all_jobs(), drained=False)
    states = [store.get_job(i).state for i in (strict, tolerant, deeper)]  # type: ignore[union-attr]
    assert states == [State.CANCELLED, State.SCHEDULED, State.CANCELLED]
    assert checker.dependencies.released == 1


def test_scenarios_draw_graphs_from_a_stream_of_their_own():
    seeds = [draw(seed) for seed in range(40)]
    with_graphs = [s for s in seeds if any(job.parents for job in s.jobs)]
    assert 10 < len(with_graphs) < 30
    jobs = [job for s in with_graphs for job in s.jobs]
    assert {job.run_on for job in jobs if job.parents} == {"success", "any"}
    assert any(len(job.parents) > 1 for job in jobs)
    for scenario in with_graphs:
        at = {job.key: job.at for job in scenario.jobs}
        assert all(at[p] <= at[job.key] for job in scenario.jobs for p in job.parents)
