"""Known bugs, planted one at a time by the self-test to show the simulator catches each.

Each is a subclass of a product class with one rule broken, and is used by nothing but :func:`self_test`;
where the broken rule lives in a module-level table, the subclass swaps it in for the length of one call
and puts it back. The self-test runs the CI's seeds in order until one trips an invariant, checks that the
same seed is clean without the plant, and reports the seed and the invariant.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..core import commands as cmd
from ..core import events as ev
from ..core import maintenance as maintenance_module
from ..core.deadlines import PER_ATTEMPT, Deadline
from ..core.driver import DriverConfig, NodeDriver, _Running
from ..core.elastic import Starvation
from ..core.records import OutcomeKind, OutcomeReport
from ..core.retention import PurgeRule
from ..core.retry import MAX_ATTEMPTS_LIMIT, RetryPolicy
from ..core.schedules import MintDecision, Misfire, ScheduleState, Walkers
from ..core.schedules import plan as plan_ticks
from ..core.states import State
from ..core.transitions import LEASE_ENDINGS
from ..store import changes, memory_scheduling
from ..store.contract import JobView, LeaseView, OutcomeDetail, ReportResult
from ..store.memory import MemoryStore
from .run import Outcome, Plant, run


class _FenceIgnoresAttempt(MemoryStore):
    @staticmethod
    def _holds(lease: LeaseView | None, worker_id: str, attempt: int, now: datetime) -> bool:
        return lease is not None and lease.owner == worker_id and lease.expires_at > now


class _ForgetsReservations(NodeDriver):
    """Claim sizing as it was before BackWave's fix 444d13f: a claim in flight reserves nothing, and a poll
    plans a new pass while one is in flight."""

    @property
    def occupied(self) -> int:
        reporting = sum(len(batch) for batch in self.reports_in_flight)
        return len(self.executing) + len(self.buffer) + reporting + self.lost_slots

    def _on_poll(self, now: datetime) -> list[cmd.Command]:
        if not self._store_ready(now):
            return []
        if self.draining:
            return self._flush()
        available = self.available
        commands = self._flush()
        plan = self.config.policy.plan(available)
        self.pending_claims = deque(plan[1:])
        if plan:
            commands.append(self._issue(plan[0]))
        return commands


class _DeadlinesOutliveAttempts(NodeDriver):
    """The Driver as it was before the time limit of an Attempt that ended was dropped with it: every limit
    stays in the heap until it comes due, and is skipped then (a pump holds one per job it ran in the last
    half hour)."""

    def _leave(self, job_id: int) -> _Running | None:
        return self.executing.pop(job_id, None)

    def _fire(self, deadline: Deadline, now: datetime) -> list[cmd.Command]:
        running = self.executing.get(deadline.job_id)
        if deadline.kind in PER_ATTEMPT and (running is None or running.job.attempt != deadline.attempt):
            return []
        return super()._fire(deadline, now)


class _SweepIgnoresCeiling(MemoryStore):
    def expire_leases(
        self, *, queues: Sequence[str], max_jobs: int, retry: RetryPolicy, now: datetime
    ) -> int:
        original = changes.for_expiry

        def without_ceiling(**facts: Any) -> changes.Change:
            return original(**{**facts, "max_attempts": MAX_ATTEMPTS_LIMIT})

        setattr(changes, "for_expiry", without_ceiling)  # noqa: B010 (a module attribute, put back below)
        try:
            return super().expire_leases(queues=queues, max_jobs=max_jobs, retry=retry, now=now)
        finally:
            setattr(changes, "for_expiry", original)  # noqa: B010


class _ReleaseCharges(MemoryStore):
    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail] | None = None,
    ) -> ReportResult:
        rows = {key: rule for key, rule in LEASE_ENDINGS.items() if key[0] is OutcomeKind.RELEASED}
        LEASE_ENDINGS.update({key: replace(rule, attempt_delta=0) for key, rule in rows.items()})
        try:
            return super().report(worker_id=worker_id, reports=reports, retry=retry, now=now, details=details)
        finally:
            LEASE_ENDINGS.update(rows)


class _ClaimsPaused(MemoryStore):
    def _free_slots(self, queue: str) -> int:
        settings = self._queues.get(queue)
        if settings is None or settings.concurrency_limit is None:
            return 1 << 62
        leased = sum(1 for lease in self._leases.values() if lease.queue == queue)
        return max(0, settings.concurrency_limit - leased)


class _MintIgnoresCursor(MemoryStore):
    """The cursor's compare-and-set forgotten: a decision made from a stale read still applies (only the
    (schedule, tick) uniqueness stands, and a purge of a tick's run takes that away)."""

    def _mint_one(self, decision: MintDecision, now: datetime) -> int:
        stored = self._schedule_table().get(decision.schedule)
        if stored is not None:
            decision = replace(decision, expected_cursor=stored.cursor)
        return super()._mint_one(decision, now)


class _PurgeByAge(MemoryStore):
    """A purge that picks jobs by age, whatever their state (and deletes their leases with them)."""

    def purge(self, rules: Sequence[PurgeRule], *, max_jobs: int, dry_run: bool = False) -> int:
        with self._lock:
            self._fault("purge", "before")
            queues = {q for rule in rules for q in rule.queues}
            cut = min((rule.before for rule in rules), default=None)
            old = [j for j in self._jobs.values() if j.queue in queues and cut and j.created_at < cut]
            for job in sorted(old, key=lambda j: j.id)[:max_jobs]:
                self._observed("purge", cut or job.created_at, job, None)
                self._drop(job.id)
                self._leases.pop(job.id, None)
            self._fault("purge", "after")
        return len(old[:max_jobs])


class _AnyFullClaim(Starvation):
    def observe(self, asked: int, got: int, now: datetime) -> None:
        if got >= asked:
            self.streak += 1
            self.last_starved = now
        else:
            self.streak = 0


class _StarvedByAnyFullClaim(NodeDriver):
    """A Driver that counts every full claim as starved, however busy its pool was: slow jobs grow groups."""

    def __init__(self, config: DriverConfig) -> None:
        super().__init__(config)
        self.starvation = _AnyFullClaim(wide=self.starvation.wide)


class _LingersWhileAnyRuns(NodeDriver):
    """A Driver whose outcomes wait for every running handler, however long they run: a slow job holds the
    outcomes of the quick ones (and their slots) until it ends."""

    def _on_idle(self, event: ev.Idle) -> list[cmd.Command]:
        return [] if self.executing and not self.draining else super()._on_idle(event)


class _ForgetsLiveRuns(MemoryStore):
    """The schedules are read, and minted, without their live runs: NO_OVERLAP never sees one."""

    def load_schedules(self, queues: Sequence[str]) -> list[ScheduleState]:
        return [replace(s, has_live_instance=False) for s in super().load_schedules(queues)]

    def _mint_one(self, decision: MintDecision, now: datetime) -> int:
        original = getattr(memory_scheduling, "confirmed")  # noqa: B009 (a module attribute, put back below)
        setattr(memory_scheduling, "confirmed", _as_planned)  # noqa: B010
        try:
            return super()._mint_one(decision, now)
        finally:
            setattr(memory_scheduling, "confirmed", original)  # noqa: B010


def _as_planned(decision: MintDecision, **_: Any) -> MintDecision:
    """``core.schedules.confirmed`` that never asks whether a run is live."""
    return decision


def _every_missed_tick(
    state: ScheduleState, now: datetime, grace: Any, limit: int = 10_000, walkers: Walkers | None = None
) -> MintDecision | None:
    """``core.schedules.plan`` with coalesce making up for every missed tick (as skip never would)."""
    decision = plan_ticks(state, now, grace, limit, walkers)
    if decision is None or state.misfire is not Misfire.COALESCE or state.paused or state.no_overlap:
        return decision
    window = state.cadence.window(state.cursor, now, grace, limit, walkers)
    ticks = (*window.missed, *window.fresh)
    return replace(decision, ticks=ticks, skipped=(), skipped_count=window.count - len(ticks))


class _CoalesceMakesUpEveryTick(NodeDriver):
    def step(self, event: ev.Event) -> list[cmd.Command]:
        original = getattr(maintenance_module, "plan")  # noqa: B009 (a module attribute, put back below)
        setattr(maintenance_module, "plan", _every_missed_tick)  # noqa: B010
        try:
            return super().step(event)
        finally:
            setattr(maintenance_module, "plan", original)  # noqa: B010


class _ClaimIgnoresPriority(MemoryStore):
    """A claim that takes a queue's due jobs by due time and id alone, whatever their priority."""

    def _due(self, queue: str, now: datetime, take: int) -> list[int]:
        due = [(self._jobs[i].due_at, i) for i in super()._due(queue, now, 1 << 62)]
        return [job_id for _, job_id in sorted(due)[:take]]


class _KeyForgetsLeased(MemoryStore):
    """A unique index that covers only waiting jobs: a running job's key looks free, so a duplicate is
    written while the holder runs (peers' users ask for this; the contract says no)."""

    def _hold_key(self, old: JobView | None, job: JobView | None) -> None:
        super()._hold_key(old, job)
        if job is not None and job.unique_key is not None and job.state is State.LEASED:
            self._keys.pop((job.wire_name, job.unique_key), None)


class _OutputIgnoresFence(MemoryStore):
    """The return values of a batch written by job id, apart from the fenced outcomes: a fenced-off
    Attempt's value lands on its job all the same."""

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail] | None = None,
    ) -> ReportResult:
        result = super().report(worker_id=worker_id, reports=reports, retry=retry, now=now, details=details)
        with self._lock:
            for job_id in sorted(result.stale):
                output = (details or {}).get(job_id, OutcomeDetail()).output
                before = self._jobs.get(job_id)
                if output is not None and before is not None and before.output != output:
                    self._put(replace(before, output=output))
                    self._observed("report", now, before, self._jobs[job_id])
        return result


class _TagsIgnoreFence(MemoryStore):
    """The tags of a batch written by job id, apart from the fenced outcomes: a fenced-off Attempt's tags
    land on its job all the same."""

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail] | None = None,
    ) -> ReportResult:
        result = super().report(worker_id=worker_id, reports=reports, retry=retry, now=now, details=details)
        with self._lock:
            for job_id in sorted(result.stale):
                tags = (details or {}).get(job_id, OutcomeDetail()).tags
                if tags and job_id in self._jobs:
                    self._tags.setdefault(job_id, set()).update(tags)
        return result


class _FailureReleasesChildren(MemoryStore):
    """Edges resolved as if every parent had succeeded: a parent's failure releases its success children."""

    def _resolve_children(self, ended: Mapping[int, State], now: datetime) -> None:
        super()._resolve_children(dict.fromkeys(ended, State.SUCCEEDED), now)


PLANTS = (
    Plant(
        name="fence-ignores-attempt",
        description="the store's fence applies a report from the lease's owner whatever Attempt it names",
        store_class=_FenceIgnoresAttempt,
    ),
    Plant(
        name="claim-forgets-reservations",
        description="the Driver sizes claims without the slots a claim in flight reserved",
        driver_class=_ForgetsReservations,
    ),
    Plant(
        name="deadlines-outlive-attempts",
        description="an Attempt that ends leaves its time limit in the Driver's heap until it comes due",
        driver_class=_DeadlinesOutliveAttempts,
    ),
    Plant(
        name="sweep-ignores-max-attempts",
        description="the lease-expiry sweep retries a job whatever its max_attempts",
        store_class=_SweepIgnoresCeiling,
    ),
    Plant(
        name="release-charges-attempt",
        description="a job given back at shutdown keeps the Attempt counted",
        store_class=_ReleaseCharges,
    ),
    Plant(
        name="paused-queue-claimed",
        description="a claim takes jobs from a paused queue",
        store_class=_ClaimsPaused,
    ),
    Plant(
        name="mint-ignores-cursor",
        description="a mint applies whatever the schedule's cursor: the compare-and-set is forgotten",
        store_class=_MintIgnoresCursor,
    ),
    Plant(
        name="purge-by-age",
        description="a purge deletes old jobs whatever their state, live ones included",
        store_class=_PurgeByAge,
    ),
    Plant(
        name="no-overlap-forgets-live-runs",
        description="schedules are read and minted without their live runs, so NO_OVERLAP never sees one",
        store_class=_ForgetsLiveRuns,
    ),
    Plant(
        name="coalesce-makes-up-every-tick",
        description="coalesce mints a run for every missed tick instead of one",
        driver_class=_CoalesceMakesUpEveryTick,
    ),
    Plant(
        name="claim-ignores-priority",
        description="a claim takes a queue's due jobs by due time alone, whatever their priority",
        store_class=_ClaimIgnoresPriority,
    ),
    Plant(
        name="unique-key-forgets-leased",
        description="the unique index forgets leased jobs, so a duplicate is written while the holder runs",
        store_class=_KeyForgetsLeased,
    ),
    Plant(
        name="output-ignores-fence",
        description="a fenced-off Attempt's return value is written onto its job all the same",
        store_class=_OutputIgnoresFence,
    ),
    Plant(
        name="tags-ignore-fence",
        description="a fenced-off Attempt's tags are written onto its job all the same",
        store_class=_TagsIgnoreFence,
    ),
    Plant(
        name="failure-releases-children",
        description="a parent that failed releases its run_on=success children as if it had succeeded",
        store_class=_FailureReleasesChildren,
    ),
    Plant(
        name="starved-by-any-full-claim",
        description="a Pump counts every full claim as starved, however few jobs it asked for, so slow jobs "
        "grow a group",
        driver_class=_StarvedByAnyFullClaim,
    ),
    Plant(
        name="lingers-while-any-runs",
        description="outcomes wait for every running handler to finish, however long it runs",
        driver_class=_LingersWhileAnyRuns,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Catch:
    plant: Plant
    outcome: Outcome | None  # the first failing run, or None: not caught within the budget
    tried: int  # seeds run
    clean_without: bool  # the same seed passes without the plant


def hunt(plant: Plant, seeds: range) -> Catch:
    tried = 0
    for seed in seeds:
        tried += 1
        outcome = run(seed, plant=plant)
        if outcome.failed:
            return Catch(plant=plant, outcome=outcome, tried=tried, clean_without=not run(seed).failed)
    return Catch(plant=plant, outcome=None, tried=tried, clean_without=True)


def self_test(seeds: range, report: Callable[[str], None]) -> bool:
    """Hunt every planted bug within ``seeds``; True when each was caught, by a seed clean without it."""
    passed = True
    for plant in PLANTS:
        catch = hunt(plant, seeds)
        outcome = catch.outcome
        if outcome is None or outcome.violation is None:
            report(f"planted {plant.name}: NOT CAUGHT in {catch.tried} seeds ({plant.description})")
            passed = False
            continue
        verdict = "" if catch.clean_without else " (BUT the seed fails without the plant too)"
        passed = passed and catch.clean_without
        report(
            f"planted {plant.name}: caught by seed {outcome.seed} ({catch.tried} seeds run): "
            f"{outcome.violation.name}{verdict}"
        )
    return passed
