"""What one seed simulates: the cluster's shape, its workload, and how hard each fault axis pushes.

Everything here is drawn from the seed's ``scenario`` stream alone, before the run starts, so a fault plan
(drawn from other streams) never changes the shape of the cluster or the jobs it gets. Each fault axis is
on in about half the seeds, at an intensity drawn from a band that keeps the run recoverable: some seeds are
calm, some are stormy, and every shape between is reached over a few hundred seeds ("swarm testing"); and
one seed in ten is a storm, every axis on at the top of its band.

What came later (schedules, retention, when the run begins, the faults that matter most to schedules) is
drawn from a stream of its own, ``calendar``, so that it changes nothing of what a seed drew before: the
same seed has the same nodes, groups, jobs and fault rates, and now also schedules. What jobs gained after
that (a priority, a unique key, a handler that returns a value) is drawn from another stream, ``features``,
for the same reason, and so is how far each group may grow under a backlog (``MAX_PUMPS``: the stream
``elastic``). A field added to :class:`Scenario` or :class:`JobSpec` later takes a default that means
what runs did before it existed, so a scenario pinned in a regression file (``simulation.regressions``) still
reads, and runs as it did.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..core.dispatch import Policy, Strict, Weighted
from ..core.retry import RetryPolicy
from .calendar import ROUTABLE, START, ScheduleSpec, draw_retention, draw_schedules, draw_start
from .plan import stream

UNROUTABLE = "sim.unknown"  # no handler is registered for it: its jobs are quarantined

#: Each fault kind, and the band its rate is drawn from when its axis is on. A rate is the chance that one
#: question (one slot of a node, one store call, one hint, one execution) gets a fault.
FAULT_BANDS: dict[str, tuple[float, float]] = {
    "crash": (0.3, 0.8),  # per node slot: the process dies; its leases lapse
    "shutdown": (0.3, 0.8),  # per node: a graceful shutdown with a grace, then a restart
    "partition": (0.3, 0.8),  # per node slot: the store is unreachable; handlers keep running
    "stall": (0.3, 0.8),  # per node slot: the loop freezes (a GC pause); handlers keep running
    "skew": (0.5, 1.0),  # per node: its clock runs ahead or behind
    "hint-lost": (0.1, 0.5),
    "hint-dup": (0.05, 0.3),
    "hint-late": (0.05, 0.3),
    "store-before": (0.005, 0.04),  # transient, before the commit: nothing written
    "store-after": (0.005, 0.04),  # transient, after the commit: written, the reply lost
    "store-late": (0.003, 0.02),  # the reply lost now, and the write commits later
    "store-fatal": (0.0005, 0.002),  # not transient: the Pump halts
    "handler-fail": (0.05, 0.3),
    "handler-hostile": (0.02, 0.15),  # it fails with NUL, lone surrogates or a huge message
    "handler-slow": (0.02, 0.15),
    "handler-hang": (0.01, 0.08),  # it ignores its timeout and cancellation, for minutes
    "operator": (1.0, 1.0),  # per slot: pause, resume, set or clear a limit, cancel, requeue
    "outage": (0.3, 0.8),  # per cluster slot: the database is down for everyone (ticks are missed)
    "schedule-op": (1.0, 1.0),  # per slot: pause, resume or run now a schedule
}
#: The share of seeds in which every fault axis is on at the top of its band.
STORM_SHARE = 0.1
AXES = {
    "nodes": ("crash", "shutdown", "partition", "stall", "skew"),
    "hints": ("hint-lost", "hint-dup", "hint-late"),
    "store": ("store-before", "store-after", "store-late", "store-fatal"),
    "handlers": ("handler-fail", "handler-hostile", "handler-slow", "handler-hang"),
    "operator": ("operator",),
}
#: The axes drawn from the ``calendar`` stream (they came later: the others keep their draws).
LATER_AXES: dict[str, tuple[str, ...]] = {"outage": ("outage",), "schedule-op": ("schedule-op",)}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSpec:
    """A worker group every node runs: its queues, its policy and its dials (times in seconds)."""

    name: str
    queues: tuple[str, ...]
    weights: tuple[int, ...] | None  # None: Strict, in the order of ``queues``
    pool_size: int
    pumps: int
    max_claim_batch: int
    max_outcome_batch: int
    lease: float
    heartbeat: float
    poll: float
    maintenance: float
    timeout: float | None
    max_pumps: int | None = None  # the elastic ceiling (MAX_PUMPS); None: fixed at ``pumps``, as runs were

    @property
    def ceiling(self) -> int:
        return self.max_pumps or self.pumps

    def new_policy(self) -> Policy:
        """A fresh policy (Weighted keeps per-Pump credit)."""
        if self.weights is None:
            return Strict(self.queues)
        return Weighted(tuple(zip(self.queues, self.weights, strict=True)))


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """One job the client enqueues at ``at`` (seconds into the run); ``key`` names it in the payload."""

    key: int
    at: float
    queue: str
    wire_name: str
    delay: float  # due this long after it is enqueued
    max_attempts: int
    timeout: float | None
    duration: float  # how long its handler runs when nothing goes wrong
    priority: int = 0  # higher is claimed first within its queue
    unique_key: str | None = None  # at most one unfinished job of its wire name holds it
    returns: bool = False  # its handler returns a value (which names the Attempt that returned it)
    parents: tuple[int, ...] = ()  # keys of jobs enqueued before it, that it waits on
    run_on: str = "success"  # when it starts after them: success or any


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    seed: int
    nodes: int
    queues: tuple[str, ...]
    groups: tuple[GroupSpec, ...]
    jobs: tuple[JobSpec, ...]
    limits: dict[str, int]  # queues limited from the start
    paused: tuple[str, ...]  # queues paused from the start
    retry: RetryPolicy
    workload: float  # seconds of faults and enqueues; then the drain
    drain_bound: float  # every job must be terminal this long after the drain starts
    rates: dict[str, float]
    operator_slots: int
    start: datetime = START  # the wall-clock instant the run begins at
    schedules: tuple[ScheduleSpec, ...] = ()
    retention: dict[str, Any] | None = None  # BACKWAVE['RETENTION'], or None: no Pump purges
    misfire_floor: float = 60.0  # the shortest misfire grace (seconds); a Pump's is at least 2 intervals
    schedule_slots: int = 0  # moments at which the operator pauses, resumes or runs a schedule now


def draw(seed: int) -> Scenario:
    rng = stream(seed, "scenario")
    queues = tuple(f"q{i}" for i in range(rng.randint(2, 4)))
    groups = _groups(rng, queues)
    workload = float(rng.randint(30, 90))
    limits = {q: rng.randint(1, 3) for q in queues if rng.random() < 0.35}
    paused = tuple(q for q in queues if rng.random() < 0.15)
    storm = stream(seed, "storm").random() < STORM_SHARE
    later = stream(seed, "calendar")
    elastic = stream(seed, "elastic")  # drawn apart, so a seed's other draws stay what they were
    groups = tuple(replace(g, max_pumps=g.pumps + elastic.choice((0, 1, 1, 2))) for g in groups)
    start = draw_start(later)
    schedules = draw_schedules(later, queues, workload, start)
    return Scenario(
        seed=seed,
        nodes=rng.choice((2, 2, 2, 3, 4)),
        queues=queues,
        groups=groups,
        jobs=_with_dependencies(
            stream(seed, "dependencies"),
            _with_features(stream(seed, "features"), _jobs(rng, queues, workload)),
        ),
        limits=limits,
        paused=paused,
        retry=RetryPolicy(max_attempts=3, backoff_base=2.0, backoff_cap=float(rng.randint(4, 20))),
        workload=workload,
        drain_bound=1800.0,
        rates={**_rates(rng, AXES, storm), **_rates(later, LATER_AXES, storm)},
        operator_slots=rng.randint(2, 8),
        start=start,
        schedules=schedules,
        retention=draw_retention(later, queues),
        misfire_floor=later.choice((2.0, 5.0, 10.0)),
        schedule_slots=later.randint(1, 4) if schedules else 0,
    )


def _groups(rng: random.Random, queues: tuple[str, ...]) -> tuple[GroupSpec, ...]:
    count = rng.choice((1, 1, 2, 2, 3))
    served: list[list[str]] = [[] for _ in range(count)]
    for queue in queues:  # every queue is served by some group
        served[rng.randrange(count)].append(queue)
    for chosen in served:
        chosen += [q for q in queues if q not in chosen and rng.random() < 0.3]
        if not chosen:
            chosen.append(rng.choice(queues))
        rng.shuffle(chosen)
    return tuple(_group(rng, f"g{i}", tuple(chosen)) for i, chosen in enumerate(served))


def _group(rng: random.Random, name: str, queues: tuple[str, ...]) -> GroupSpec:
    pool = rng.randint(1, 4)
    lease = float(rng.randint(10, 40))
    weighted = len(queues) > 1 and rng.random() < 0.5
    return GroupSpec(
        name=name,
        queues=queues,
        weights=tuple(rng.randint(1, 4) for _ in queues) if weighted else None,
        pool_size=pool,
        pumps=rng.choice((1, 1, 1, 2)),
        max_claim_batch=rng.randint(1, pool + 1),
        max_outcome_batch=rng.randint(1, 4),
        lease=lease,
        heartbeat=lease / 3,
        poll=rng.choice((0.5, 1.0, 1.0, 2.0)),
        maintenance=float(rng.randint(1, 5)),
        timeout=float(rng.randint(3, 20)) if rng.random() < 0.5 else None,
    )


def _jobs(rng: random.Random, queues: tuple[str, ...], workload: float) -> tuple[JobSpec, ...]:
    """Jobs arriving at random, and in bursts (a burst of enqueues is a burst of hints)."""
    bursts = [rng.uniform(0.0, workload * 0.8) for _ in range(rng.randint(1, 4))]
    times = [
        rng.choice(bursts) + rng.uniform(0.0, 1.0) if rng.random() < 0.6 else rng.uniform(0.0, workload * 0.8)
        for _ in range(rng.randint(8, 30))
    ]
    return tuple(_job(rng, key, queues, at) for key, at in enumerate(times))


def _job(rng: random.Random, key: int, queues: tuple[str, ...], at: float) -> JobSpec:
    return JobSpec(
        key=key,
        at=round(at, 3),
        queue=rng.choice(queues),
        wire_name=UNROUTABLE if rng.random() < 0.05 else ROUTABLE,
        delay=0.0 if rng.random() < 0.7 else float(rng.randint(1, 20)),
        max_attempts=rng.randint(1, 4),
        timeout=float(rng.randint(2, 15)) if rng.random() < 0.3 else None,
        duration=round(10 ** rng.uniform(-1.7, 0.5), 3),  # 20 ms to 3 s
    )


#: Priorities a prioritised job takes half the time (ties at the same non-zero priority), else any in range.
PRIORITIES = (-100, -1, 1, 50, 100)


def _with_features(rng: random.Random, jobs: tuple[JobSpec, ...]) -> tuple[JobSpec, ...]:
    """Priorities in three seeds of five (mostly 0 still); unique keys in three of five, shared from a set
    of one to three keys, so that duplicates really happen (while the holder waits, runs, is retried, and
    after it finished); handlers that return a value in two of three. Every job makes the same draws, so
    what one job drew never depends on another's."""
    prioritised = rng.random() < 0.6
    keyed = rng.choice((0.0, 0.0, 0.3, 0.6, 0.9))  # the share of jobs that have a key
    keys = rng.randint(1, 3)
    returning = rng.choice((0.0, 0.5, 0.9))
    drawn = []
    for job in jobs:
        spread, palette, anywhere = rng.random(), rng.choice(PRIORITIES), rng.randint(-100, 100)
        pick, key, returns = rng.random(), rng.randrange(keys), rng.random() < returning
        priority = (palette if spread < 0.2 else anywhere) if prioritised and spread < 0.4 else 0
        unique_key = f"key-{key}" if pick < keyed else None
        drawn.append(replace(job, priority=priority, unique_key=unique_key, returns=returns))
    return tuple(drawn)


def _with_dependencies(rng: random.Random, jobs: tuple[JobSpec, ...]) -> tuple[JobSpec, ...]:
    """Dependencies in half the seeds: a third of their jobs wait on one to three jobs enqueued before them
    (so chains, fan-ins and diamonds form), under success or any. A stream of its own, so the jobs drawn
    before dependencies existed are drawn the same."""
    if rng.random() < 0.5:
        return jobs
    drawn = []
    for job in jobs:
        earlier = sorted(j.key for j in jobs if (j.at, j.key) < (job.at, job.key))
        picked, count, rule = rng.random(), rng.randint(1, 3), rng.choice(("success", "success", "any"))
        if picked < 0.35 and earlier:
            parents = tuple(sorted(rng.sample(earlier[-6:], min(count, len(earlier[-6:])))))
            job = replace(job, parents=parents, run_on=rule)
        drawn.append(job)
    return tuple(drawn)


def _rates(rng: random.Random, axes: Mapping[str, tuple[str, ...]], storm: bool) -> dict[str, float]:
    """Each axis on in about half the seeds, at an intensity within its band; in a storm, every kind at the
    top of its band (drawn all the same, so that a storm changes nothing else of the scenario)."""
    rates = {}
    for kinds in axes.values():
        on = rng.random() < 0.5
        for kind in kinds:
            low, high = FAULT_BANDS[kind]
            rates[kind] = rng.uniform(low, high) if on and rng.random() < 0.8 else 0.0
    return {kind: FAULT_BANDS[kind][1] for kind in rates} if storm else rates
