"""One run: a seed (and optionally a pinned scenario, a recorded fault plan, or a planted bug) in, what
happened out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.driver import NodeDriver
from ..store.memory import MemoryStore
from .cluster import Cluster
from .invariants import Violation
from .plan import Address, FaultPlan, Params
from .scenario import Scenario, draw


@dataclass(frozen=True, slots=True, kw_only=True)
class Plant:
    """A known bug, planted for the self-test only: the product's classes with one rule broken."""

    name: str
    description: str
    store_class: type[MemoryStore] = MemoryStore
    driver_class: type[NodeDriver] = NodeDriver


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    seed: int
    scenario: Scenario
    violation: Violation | None
    steps: int  # events the Drivers took
    actions: int  # actions of the timeline (steps, store calls, handlers, faults)
    jobs: int  # jobs the store made (enqueued and minted), purged ones included
    minted: int  # runs schedules minted
    purged: int  # finished jobs purged
    checks: int  # invariant checks made
    faults: Counter[str]  # faults injected, by kind
    keys: Counter[str]  # what enqueues of held unique keys met (``feature_checks.FeatureWatch.seen``)
    plan: dict[Address, Params]  # every fault decision, by address: replays the run
    lines: tuple[str, ...]  # the trace, when asked for
    seconds: float  # of virtual time

    @property
    def failed(self) -> bool:
        return self.violation is not None


def run(
    seed: int,
    *,
    scenario: Scenario | None = None,
    plan: Mapping[Address, Params] | None = None,
    plant: Plant | None = None,
    tracing: bool = False,
) -> Outcome:
    """Simulate seed ``seed`` (the scenario it draws, or ``scenario``, pinned); with ``plan``, only its
    faults (a replay, or a minimizer's candidate)."""
    scenario = scenario or draw(seed)
    faults = FaultPlan(seed, scenario.rates, plan)
    cluster = Cluster(
        scenario,
        faults,
        store_class=plant.store_class if plant else MemoryStore,
        driver_class=plant.driver_class if plant else NodeDriver,
        tracing=tracing,
    )
    violation = None
    try:
        cluster.run()
    except Violation as found:
        violation = found
        cluster.note("CHECK", f"VIOLATION {found}")
    return Outcome(
        seed=seed,
        scenario=scenario,
        violation=violation,
        steps=cluster.steps,
        actions=cluster.timeline.actions,
        jobs=len(cluster.checker.jobs) + cluster.checker.purged,
        minted=len(cluster.checker.schedules.log),
        purged=cluster.checker.purged,
        checks=cluster.checker.checks,
        faults=faults.injected,
        keys=cluster.checker.features.seen,
        plan=dict(faults.decisions),
        lines=tuple(cluster.lines),
        seconds=cluster.timeline.now / 1e6,
    )
