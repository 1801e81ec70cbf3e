"""Properties under a seeded random Shell: bursts of polls never overshoot the pool, store faults and timeouts
included, and a shutdown always ends in Stop with every store call answered."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core import events as ev
from backwave_django.core.dispatch import Strict
from backwave_django.core.driver import NodeDriver
from backwave_django.core.records import HeartbeatResult

from .helpers import at, driver, job, secs, weighted


@dataclass
class FakeShell:
    """Obeys the Driver like the Pump would, answering store calls in FIFO order at random moments; a store
    call sometimes raises (a transient fault, then a failed reply, as the command runner does).

    It keeps its own count of the leases this worker holds, independent of the Driver's bookkeeping.
    """

    driver: NodeDriver
    rng: random.Random
    troubled: bool  # store calls sometimes raise, and handlers may time out
    claims: deque[int] = field(default_factory=deque)  # max_jobs of each unanswered claim
    reports: deque[tuple[int, ...]] = field(default_factory=deque)
    beats: deque[tuple[int, ...]] = field(default_factory=deque)
    sweeps: int = 0
    loads: int = 0
    polls: int = 0  # RequestPolls queued behind other events
    running: list[int] = field(default_factory=list)
    finishing: int | None = None  # the job whose ending is being stepped
    abandoned: list[int] = field(default_factory=list)  # cut off, but their threads may still report
    held: set[int] = field(default_factory=set)  # claimed, and neither written back nor lost
    wake_at: datetime | None = None
    peak: int = 0  # the most leases held at once
    next_id: int = 1
    clock: float = 0.0
    ended: str | None = None  # "stopped" once the Driver said Stop

    def step(self, event: ev.Event) -> None:
        assert self.ended is None, f"an event after the Driver ended: {event!r}"
        commands = self.driver.step(event)
        last = (cmd.Stop, cmd.Halt)
        assert not any(isinstance(c, last) for c in commands[:-1]), f"commands after the end: {commands}"
        for command in commands:
            self.obey(command)
        leased = len(self.held) + sum(self.claims)
        self.peak = max(self.peak, leased)
        assert leased <= self.driver.config.pool_size, "the worker holds more leases than its pool"
        assert self.driver.occupied <= self.driver.config.pool_size
        assert self.sweeps <= 1, "two sweeps in flight"

    def obey(self, command: cmd.Command) -> None:
        match command:
            case cmd.ClaimBatch(max_jobs=n):
                assert 0 < n <= self.driver.config.max_claim_batch
                assert not self.driver.draining, "a claim during shutdown"
                self.claims.append(n)
            case cmd.ExecuteJob(job=claimed_job):
                assert claimed_job.id not in self.running
                self.running.append(claimed_job.id)
            case cmd.ReportOutcomes(reports=batch):
                self.reports.append(tuple(r.job_id for r in batch))
            case cmd.Heartbeat(job_ids=ids):
                assert len(set(ids)) == len(ids)
                self.beats.append(ids)
            case cmd.ExpireLeases():
                self.sweeps += 1
            case cmd.LoadSchedules():
                self.loads += 1
            case cmd.SignalCancellation(job_id=job_id):
                # deadlines due at an event's time fire before the event is handled, so a job's timeout
                # may pass in the very step that hears it ended: a late signal the Shell ignores
                assert job_id in self.running or job_id == self.finishing
            case cmd.AbandonExecution(job_id=job_id):
                if job_id != self.finishing:  # its grace may pass in the step that hears it ended, too
                    self.running.remove(job_id)
                    self.abandoned.append(job_id)
            case cmd.RequestPoll():
                self.polls += 1
            case cmd.WakeAt(at=wake_at):
                self.wake_at = wake_at
            case cmd.RecordStatus():
                pass
            case cmd.Stop():
                self.ended = "stopped"
            case _:  # pragma: no cover - a transient fault never halts
                raise AssertionError(f"unexpected {command!r}")

    def now(self) -> datetime:
        self.clock += self.rng.random()
        return at(self.clock)

    def act(self) -> None:
        """One thing happens, chosen at random among the things that can happen now."""
        actions = [self.burst_of_polls, self.heartbeat_tick, self.maintenance_tick, self.idle]
        if self.polls:
            actions.append(self.obey_queued_polls)
        if self.claims:
            actions.append(self.answer_claim)
        if self.running:
            actions.append(self.finish_a_job)
        if self.abandoned:
            actions.append(self.abandoned_thread_reports)
        if self.reports:
            actions.append(self.answer_report)
        if self.beats:
            actions.append(self.answer_heartbeat)
        if self.sweeps:
            actions.append(self.answer_sweep)
        if self.loads:
            actions.append(self.answer_load)
        if self.wake_at is not None:
            actions.append(self.timer_fires)
        self.rng.choice(actions)()

    def raises(self) -> bool:
        """Whether the store call being answered raised: then the Driver hears of the fault first."""
        if not self.troubled or self.rng.random() >= 0.1:
            return False
        self.step(ev.StoreFaulted(now=self.now(), transient=True, detail="OperationalError: gone"))
        return True

    def burst_of_polls(self) -> None:  # poll ticks and wake-up hints arriving together
        for _ in range(self.rng.randint(1, 5)):
            self.step(ev.PollDue(now=self.now()))

    def obey_queued_polls(self) -> None:  # every queued RequestPoll, back to back
        while self.polls and self.ended is None:
            self.polls -= 1
            self.step(ev.PollDue(now=self.now()))

    def idle(self) -> None:
        self.step(ev.Idle(now=self.now()))

    def answer_claim(self) -> None:
        n = self.claims.popleft()
        if self.raises():
            self.step(ev.ClaimCompleted(now=self.now(), failed=True))
            return
        timeouts = [None, None, 2, 5] if self.troubled else [None]
        jobs = [
            job(self.next_id + i, timeout=self.rng.choice(timeouts)) for i in range(self.rng.randint(0, n))
        ]
        self.next_id += len(jobs)
        self.held.update(j.id for j in jobs)
        self.step(ev.ClaimCompleted(now=self.now(), jobs=tuple(jobs)))

    def finish_a_job(self) -> None:
        job_id = self.finishing = self.running.pop(self.rng.randrange(len(self.running)))
        if self.rng.random() < 0.7:
            self.step(ev.ExecutionSucceeded(now=self.now(), job_id=job_id))
        else:
            self.step(ev.ExecutionFailed(now=self.now(), job_id=job_id, message="boom"))
        self.finishing = None

    def abandoned_thread_reports(self) -> None:  # the Driver must drop what a cut-off handler says
        job_id = self.abandoned.pop(self.rng.randrange(len(self.abandoned)))
        self.step(ev.ExecutionSucceeded(now=self.now(), job_id=job_id))

    def answer_report(self) -> None:
        ids = self.reports.popleft()
        if self.raises():
            self.step(ev.OutcomesReported(now=self.now(), failed=True))  # nothing written: leases held
            return
        self.held.difference_update(ids)
        applied = frozenset(i for i in ids if self.rng.random() < 0.8)
        self.step(ev.OutcomesReported(now=self.now(), applied=applied, stale=frozenset(ids) - applied))

    def heartbeat_tick(self) -> None:
        self.step(ev.HeartbeatDue(now=self.now()))

    def answer_heartbeat(self) -> None:
        ids = self.beats.popleft()
        if self.raises():
            self.step(ev.HeartbeatCompleted(now=self.now(), failed=True))
            return
        results = tuple(
            HeartbeatResult(
                job_id=i, renewed=self.rng.random() < 0.9, cancel_requested=self.rng.random() < 0.1
            )
            for i in ids
        )
        self.held.difference_update(r.job_id for r in results if not r.renewed)
        self.step(ev.HeartbeatCompleted(now=self.now(), results=results))

    def maintenance_tick(self) -> None:
        self.step(ev.MaintenanceDue(now=self.now()))

    def answer_load(self) -> None:
        self.loads -= 1
        if self.raises():
            self.step(ev.SchedulesLoaded(now=self.now(), failed=True))
            return
        self.step(ev.SchedulesLoaded(now=self.now()))  # no schedules: nothing to mint

    def answer_sweep(self) -> None:
        self.sweeps -= 1
        if self.raises():
            self.step(ev.LeasesExpired(now=self.now(), count=0, failed=True))
            return
        self.step(ev.LeasesExpired(now=self.now(), count=self.rng.choice([0, 1, 4])))

    def timer_fires(self) -> None:
        assert self.wake_at is not None
        self.clock = max(self.clock, (self.wake_at - at(0)).total_seconds())
        self.wake_at = None
        self.step(ev.TimerFired(now=at(self.clock)))


POLICIES = [
    pytest.param(lambda: Strict(("a", "b")), id="strict"),
    pytest.param(weighted(("a", 3), ("b", 1)), id="weighted-3-1"),
    pytest.param(weighted(("a", 1), ("b", 1), ("c", 5)), id="weighted-1-1-5"),
]


def _shell(policy, seed: int, *, troubled: bool) -> FakeShell:
    """A pool of 7; ``troubled``: store calls sometimes raise and handlers have an 8 s time limit (some jobs
    2 or 5 s), so timeouts, backoffs and failed writes are part of the run."""
    node = driver(
        policy=policy,
        pool_size=7,
        max_claim_batch=4,
        max_outcome_batch=3,
        maintenance_interval=timedelta(seconds=2),
        timeout=secs(8) if troubled else None,
    )
    return FakeShell(driver=node, rng=random.Random(seed), troubled=troubled)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("policy", POLICIES)
def test_claims_never_overshoot_the_pool_under_a_burst_of_polls(policy, seed):
    shell = _shell(policy, seed, troubled=False)
    for _ in range(600):
        shell.act()
    assert shell.peak == shell.driver.config.pool_size, "the run never filled the pool, so it proves nothing"
    assert shell.next_id > 20, "the run claimed too little to prove anything"


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("policy", POLICIES)
def test_claims_never_overshoot_the_pool_through_store_faults_and_timeouts(policy, seed):
    shell = _shell(policy, seed, troubled=True)
    for _ in range(600):
        shell.act()
    assert shell.peak >= shell.driver.config.pool_size - 2, (
        "the run barely used the pool, so it proves little"
    )
    assert shell.next_id > 20, "the run claimed too little to prove anything"


@pytest.mark.parametrize("troubled", [False, True], ids=["smooth", "troubled"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("policy", POLICIES)
def test_a_shutdown_always_ends_in_stop_with_every_store_call_answered(policy, seed, troubled):
    shell = _shell(policy, seed, troubled=troubled)
    for _ in range(200):
        shell.act()
    shell.step(ev.ShutdownRequested(now=shell.now(), grace=secs(shell.rng.choice([0, 1, 5]))))
    for _ in range(2000):
        if shell.ended:
            break
        shell.act()
    assert shell.ended == "stopped"
    assert not (shell.claims or shell.reports or shell.running), "stopped with work outstanding"
    assert shell.driver.idle
