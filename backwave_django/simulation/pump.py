"""A simulated Pump: the production Pump's loop and command runner, on virtual time, without threads.

It is ``shell.pump.Pump`` and ``shell.runner.CommandRunner`` translated line for line: one queue of events,
timers (poll, heartbeat, maintenance, the Driver's WakeAt) that fire when the loop turns, one poll gate that
coalesces ticks and hints, ``Idle`` when the queue runs empty, and the commands of a step obeyed in order,
each store call taking its (seeded) time while other nodes go on. A store fault is answered as the runner
answers it: ``StoreFaulted`` with the store's own ``is_transient_fault``, then a failed reply for every
store command of the step not yet carried out (``core.replies``, the runner's own table), while the other
commands still run; a purge the store refuses for good is answered failed and never halts the Pump.

The maintenance calls of schedules and retention (load, mint, purge) go through a connection of their own,
``<site>/upkeep``: they share the node's network (a partition cuts both) but not its fault addresses, so a
schedule's calls never move the faults decided for the job cycle's calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..core import commands as cmd
from ..core import events as ev
from ..core.deadlines import COMPACT_SLACK, Kind
from ..core.driver import DriverConfig, NodeDriver
from ..core.health import Health
from ..core.replies import STORE_COMMANDS, unissued
from ..core.schedules import ScheduleState
from ..core.text import describe
from . import trace
from .calendar import misfire_grace, retention_rules
from .connection import Connection
from .executor import Executor
from .invariants import Loaded, Violation
from .scenario import GroupSpec
from .timeline import between, us

if TYPE_CHECKING:
    from .cluster import Cluster, Node

POLL, IDLE, HEARTBEAT, MAINTENANCE, TIMER = "poll", "idle", "heartbeat", "maintenance", "timer"
MARKERS: dict[str, Callable[[datetime], ev.Event]] = {
    POLL: lambda now: ev.PollDue(now=now),
    IDLE: lambda now: ev.Idle(now=now),
    HEARTBEAT: lambda now: ev.HeartbeatDue(now=now),
    MAINTENANCE: lambda now: ev.MaintenanceDue(now=now),
    TIMER: lambda now: ev.TimerFired(now=now),
}


#: The store commands of maintenance's schedules and retention: they go through the upkeep connection.
UPKEEP = (cmd.LoadSchedules, cmd.MintSchedules, cmd.PurgeFinished)


def failed_reply(command: cmd.Command, now: datetime) -> ev.Event:
    """The reply a store command gets when it was not carried out (the runner's, from ``core.replies``)."""
    reply = unissued(command, now)
    assert reply is not None, f"not a store command: {command!r}"
    return reply


class SimPump:
    def __init__(self, sim: Cluster, node: Node, spec: GroupSpec, index: int) -> None:
        self.sim, self.node, self.spec, self.index = sim, node, spec, index
        self.site = f"n{node.index}.{spec.name}.{index}"  # the same across restarts: fault addresses
        self.worker_id = f"node{node.index}:{node.generation}:{spec.name}:{index}"
        scenario = sim.scenario
        self.grace = misfire_grace(scenario.misfire_floor, spec.maintenance)
        self.driver: NodeDriver = sim.driver_class(
            DriverConfig(
                policy=spec.new_policy(),
                pool_size=spec.pool_size,
                max_claim_batch=spec.max_claim_batch,
                max_outcome_batch=spec.max_outcome_batch,
                lease_duration=timedelta(seconds=spec.lease),
                maintenance_interval=timedelta(seconds=spec.maintenance),
                retry=scenario.retry,
                timeout=None if spec.timeout is None else timedelta(seconds=spec.timeout),
                retention=retention_rules(scenario.retention, spec.queues),
                misfire_grace=self.grace,
            )
        )
        self.conn = Connection(sim, self.site)
        self.claim = sim.checker.features.claimer(sim.store)  # store.claim, watched (ClaimOrder)
        self.upkeep = Connection(sim, f"{self.site}/upkeep")
        self.cut_off_until(node.partitioned_until)
        self.loaded: Loaded | None = None  # the schedules as this Pump's last LoadSchedules read them
        self.inbox: deque[str | ev.Event] = deque()
        now = sim.timeline.now
        self.periods = {POLL: us(spec.poll), HEARTBEAT: us(spec.heartbeat), MAINTENANCE: us(spec.maintenance)}
        self.deadlines = {POLL: now, HEARTBEAT: now + self.periods[HEARTBEAT], MAINTENANCE: now}
        self.soonest = now  # min(deadlines): a turn before it has no timer to fire
        self.poll_pending = self.since_idle = self.busy = False
        self.alive = True
        self.ending: Health | None = None
        self.started_at = self.wall()
        self._token = 0
        self._turn_at: int | None = None
        self._commands: list[cmd.Command] = []
        self._position = 0
        self._produced: list[ev.Event] = []
        self._faulted = False
        self._event_now = self.started_at
        self.grace_ends: datetime | None = None  # when a shutdown's grace ends, on this node's clock
        self.last_status = Health.RUNNING  # as last recorded (or tried to be)
        self.executor = Executor(self)
        self.leaving = False  # an added Pump its node let go (core.elastic): draining, out of its group
        # The claims as the simulator sees them, apart from the Driver's count: the size of each claim the
        # store answered, until its answer is handled, and the starved ones among those handled.
        self.asked: deque[int] = deque()
        self.starved_in_a_row = 0
        self.last_starved: datetime | None = None
        self.unwritten: dict[int, datetime] = {}  # job id -> since when its outcome waits in the buffer

    def wall(self, at: int | None = None) -> datetime:
        """This node's clock (skewed), now or at virtual time ``at``."""
        return self.node.wall(at)

    # -- lifecycle ---------------------------------------------------------------------------------

    def open(self) -> None:
        self.sim.note(self.site, f"pump {self.worker_id} starts")
        self._record(Health.RUNNING, "")
        self.kick()

    def cut_off_until(self, until: int) -> None:
        """The node is partitioned until ``until``: every connection of this Pump fails until then."""
        self.conn.partitioned_until = self.upkeep.partitioned_until = until

    def kill(self) -> None:
        """The process died: nothing more happens here, and nothing it had in memory survives."""
        self.alive = False
        self.inbox.clear()

    def _close(self) -> None:
        self.sim.checker.expect(
            self.last_status is self.ending,
            "StatusFinal",
            lambda: f"{self.worker_id} ended {self.ending} but last recorded {self.last_status}",
        )
        self.alive = False
        self.sim.note(self.site, f"pump {self.worker_id} ends: {self.ending}")
        self.node.pump_ended(self)

    # -- the loop ----------------------------------------------------------------------------------

    def post(self, event: ev.Event) -> None:
        """An event from outside the loop (a handler, the pool, a shutdown): queued at the back."""
        if self.alive:
            self.inbox.append(event)
            self.kick()

    def request_poll(self) -> None:
        """The poll gate: at most one poll pending."""
        if self.poll_pending or not self.alive:
            return
        self.poll_pending = True
        self.inbox.append(POLL)
        self.kick()

    def kick(self) -> None:
        if self.alive and not self.busy:
            self._turn_at_or_before(self.sim.timeline.now)

    def _turn_at_or_before(self, when: int) -> None:
        if self._turn_at is not None and self._turn_at <= when:
            return
        self._token += 1
        self._turn_at = when
        self.sim.timeline.at(when, self._turn, self._token)

    def _turn(self, token: int) -> None:
        if token != self._token or not self.alive:
            return
        self._turn_at = None
        if self.busy:
            return
        now = self.sim.timeline.now
        if self.node.stalled_until > now:
            self._turn_at_or_before(self.node.stalled_until)
            return
        if now >= self.soonest:
            self._fire_timers(now)
        if self.since_idle and not self.inbox:
            self.since_idle = False
            self.inbox.append(IDLE)
        if self.inbox:
            self._handle(self.inbox.popleft())
        else:
            self._turn_at_or_before(self.soonest)

    def _fire_timers(self, now: int) -> None:
        for marker, deadline in list(self.deadlines.items()):
            if now < deadline:
                continue
            if marker == TIMER:
                del self.deadlines[TIMER]
                self.inbox.append(TIMER)
                continue
            self.deadlines[marker] = now + self.periods[marker]
            if marker == POLL:
                self.request_poll()
            else:
                self.inbox.append(marker)
        self.soonest = min(self.deadlines.values())

    def _handle(self, item: str | ev.Event) -> None:
        if item != IDLE:
            self.since_idle = True
        if isinstance(item, str):
            if item == POLL:
                self.poll_pending = False
            event = MARKERS[item](self.wall())
        else:
            event = item
        self._event_now = event.now
        if isinstance(event, ev.ClaimCompleted) and not event.failed:
            self._saw_claim(self.asked.popleft(), len(event.jobs), event.now)
        if isinstance(event, ev.ShutdownRequested) and self.grace_ends is None:
            self.grace_ends = event.now + max(event.grace, timedelta(0))
        try:
            commands = self.driver.step(event)
        except Violation:
            raise
        except Exception as exc:
            self.sim.checker.fail("PumpLoopSound", f"{self.worker_id}: the Driver raised {exc!r} on {event}")
        self._check_deadlines()
        self._check_linger(event)
        self.sim.steps += 1
        if isinstance(event, ev.ClaimCompleted):
            self.node.adapt()  # shell.node.Node.adapt runs every tick; a claim is when its answer can change
        if self.sim.tracing:
            self.sim.note(self.site, "<- " + trace.event(event))
            for command in commands:
                self.sim.note(self.site, "   -> " + trace.command(command))
        self.busy = True
        self._commands, self._position, self._produced, self._faulted = commands, 0, [], False
        self._continue()

    def _saw_claim(self, asked: int, got: int, now: datetime) -> None:
        """The elastic rule's starved claim, counted here on its own to hold the node to it: a claim that came
        back full, for at least half of what the pool and the batch let one claim take."""
        wide = min(self.spec.pool_size, self.spec.max_claim_batch)
        if got >= asked and 2 * asked >= wide:
            self.starved_in_a_row += 1
            self.last_starved = now
        else:
            self.starved_in_a_row = 0

    def _check_linger(self, event: ev.Event) -> None:
        """OutcomesLingerBounded, timed by the simulator itself: since when each outcome in the buffer has
        been there (an outcome put back after a failed write counts from then)."""
        driver = self.driver
        buffered = {report.job_id for report in driver.buffer}
        self.unwritten = {job_id: self.unwritten.get(job_id, event.now) for job_id in buffered}
        if not isinstance(event, ev.Idle) or not buffered or driver.stopped or driver.halted:
            return
        if driver.store_retry_at is not None and event.now < driver.store_retry_at:
            return  # backing off: the store is written to once it is back
        oldest = min(self.unwritten.values())
        lingering = driver.executing and not driver.draining
        self.sim.checker.expect(
            bool(lingering) and event.now - oldest < driver.config.report_linger,
            "OutcomesLingerBounded",
            lambda: (
                f"{self.worker_id}: idle with {len(buffered)} outcome(s) unwritten since "
                f"{(event.now - oldest).total_seconds() * 1000:.1f} ms, {len(driver.executing)} running, "
                f"draining {driver.draining}"
            ),
        )

    def _check_deadlines(self) -> None:
        deadlines, executing = self.driver.deadlines, self.driver.executing
        running = {(job_id, run.job.attempt) for job_id, run in executing.items()}
        kept = deadlines.attempts()
        if not kept <= running or len(deadlines) > 2 * len(running) + COMPACT_SLACK + len(Kind):
            self.sim.checker.fail(
                "DeadlinesFollowAttempts",
                f"{self.worker_id}: deadlines for {sorted(kept - running)} (not running), "
                f"{len(deadlines)} entries for {len(running)} running",
            )

    def _continue(self) -> None:
        if not self.alive:
            return
        now = self.sim.timeline.now
        if self.node.stalled_until > now:  # the loop froze in the middle of a step
            self.sim.timeline.at(self.node.stalled_until, self._continue)
            return
        while self._position < len(self._commands):
            command = self._commands[self._position]
            self._position += 1
            took = self._obey(command)
            if took:
                self.sim.timeline.after(took, self._continue)
                return
        self.inbox.extend(self._produced)
        self.busy = False
        self.executor.check_time_limits(self._event_now)
        if self.ending is not None:
            self._close()
        else:
            self.kick()

    # -- obeying -----------------------------------------------------------------------------------

    def _obey(self, command: cmd.Command) -> int:
        """Carry out one command; the microseconds it took (store calls take time)."""
        match command:
            case _ if isinstance(command, STORE_COMMANDS):
                return self._store(command)
            case cmd.ExecuteJob(job=job, cut_off_at=cut_off_at):
                unroutable = self.executor.execute(job, self._event_now, cut_off_at)
                if unroutable is not None:
                    self._produced.append(unroutable)
            case cmd.SignalCancellation(job_id=job_id):
                self.executor.signal(job_id)
            case cmd.AbandonExecution(job_id=job_id):
                self.executor.abandon(job_id)
            case cmd.RequestPoll():
                self.request_poll()
            case cmd.WakeAt(at=at):
                self.deadlines[TIMER] = self.sim.timeline.now + between(at, self.wall())
                self.soonest = min(self.deadlines.values())
            case cmd.RecordStatus(health=health, detail=detail):
                self.last_status = health
                return self._record(health, detail)
            case cmd.Halt():
                self.ending = Health.HALTED
            case cmd.Stop():
                self.ending = Health.STOPPED
        return 0

    def _store(self, command: cmd.Command) -> int:
        if self._faulted:  # a fault earlier in this step: answer it unissued
            self._produced.append(failed_reply(command, self.wall()))
            return 0
        conn = self.upkeep if isinstance(command, UPKEEP) else self.conn
        try:
            reply = self._call(command, conn)
        except Violation:
            raise
        except Exception as exc:
            done = self.wall(self.sim.timeline.now + conn.latency)
            transient = self.sim.store.is_transient_fault(exc)
            if isinstance(command, cmd.PurgeFinished) and not transient:
                # The runner's rule: housekeeping never halts a Pump; the purge is tried again later.
                self._produced.append(ev.FinishedPurged(now=done, failed=True))
                return conn.latency
            self._produced.append(ev.StoreFaulted(now=done, transient=transient, detail=describe(exc)))
            self._produced.append(failed_reply(command, done))
            self._faulted = True
            return conn.latency
        self._produced.append(reply)
        return conn.latency

    def _call(self, command: cmd.Command, conn: Connection) -> ev.Event:
        if isinstance(command, UPKEEP):
            return self._upkeep(command, conn)
        store, now, worker = self.sim.store, self.wall(), self.worker_id
        call = self.conn.call
        match command:
            case cmd.ClaimBatch(queues=queues, max_jobs=max_jobs, lease_duration=lease):
                jobs = call(
                    self.claim,
                    worker_id=worker,
                    queues=queues,
                    max_jobs=max_jobs,
                    lease_duration=lease,
                    now=now,
                )
                self.asked.append(max_jobs)
                return ev.ClaimCompleted(now=self._done(), jobs=tuple(jobs))
            case cmd.ReportOutcomes(reports=reports, retry=retry):
                attempts: dict[int, int] = {}
                for report in reports:
                    attempts.setdefault(report.job_id, report.attempt)
                details = self.executor.details_for(reports)
                holders = {r.job_id for r in reports if self._holds(r.job_id, r.attempt, now)}
                result = call(
                    store.report, reporting=attempts, worker_id=worker, reports=reports, retry=retry, now=now,
                    details=details,
                )  # fmt: skip
                self.sim.checker.expect(
                    holders <= result.applied,
                    "FenceAdmitsHolder",
                    lambda: (
                        f"{worker} holds {sorted(holders - result.applied)} but its reports were fenced off"
                    ),
                )
                self.executor.forget_details(reports)  # kept until written: a failed write is retried
                return ev.OutcomesReported(
                    now=self._done(), applied=result.applied, stale=result.stale, opened=result.opened
                )
            case cmd.Heartbeat(job_ids=job_ids, lease_duration=lease):
                results = call(
                    store.heartbeat, worker_id=worker, job_ids=job_ids, lease_duration=lease, now=now
                )
                return ev.HeartbeatCompleted(now=self._done(), results=tuple(results))
            case cmd.ExpireLeases(queues=queues, max_jobs=max_jobs, retry=retry):
                count = call(store.expire_leases, queues=queues, max_jobs=max_jobs, retry=retry, now=now)
                return ev.LeasesExpired(now=self._done(), count=count)
        raise AssertionError(f"not a store command: {command!r}")

    def _upkeep(self, command: cmd.Command, conn: Connection) -> ev.Event:
        """The store calls of schedules and retention, as the runner makes them."""
        store, now = self.sim.store, self.wall()
        match command:
            case cmd.LoadSchedules(queues=queues):
                schedules: tuple[ScheduleState, ...] = tuple(conn.call(store.load_schedules, queues=queues))
                done = self._done(conn)
                self.loaded = Loaded(at=done, grace=self.grace, schedules={s.name: s for s in schedules})
                return ev.SchedulesLoaded(now=done, schedules=schedules)
            case cmd.MintSchedules(decisions=decisions):
                minted = conn.call(self.sim.checker.minter(store, self.loaded), decisions=decisions, now=now)
                return ev.SchedulesMinted(now=self._done(conn), minted=minted)
            case cmd.PurgeFinished(rules=rules, max_jobs=max_jobs):
                count = conn.call(store.purge, rules=rules, max_jobs=max_jobs)
                return ev.FinishedPurged(now=self._done(conn), count=count)
        raise AssertionError(f"not an upkeep command: {command!r}")

    def _holds(self, job_id: int, attempt: int, now: datetime) -> bool:
        """The fence, as the contract states it, read before the write."""
        lease = self.sim.store.get_lease(job_id)
        return (
            lease is not None
            and (lease.owner, lease.attempt) == (self.worker_id, attempt)
            and lease.expires_at > now
        )

    def _done(self, conn: Connection | None = None) -> datetime:
        return self.wall(self.sim.timeline.now + (conn or self.conn).latency)

    def _record(self, health: Health, detail: str) -> int:
        """RecordStatus: a store round-trip whose failure never takes the Pump down."""
        try:
            self.conn.call(
                self.sim.store.record_pump, worker_id=self.worker_id, group=self.spec.name,
                queues=self.spec.queues, health=health, detail=detail, started_at=self.started_at,
                now=self.wall(),
            )  # fmt: skip
        except Violation:
            raise
        except Exception:
            return self.conn.latency
        views = self.sim.store.list_pumps()
        self.sim.checker.pump_recorded(next((v for v in views if v.worker_id == self.worker_id), None))
        return self.conn.latency
