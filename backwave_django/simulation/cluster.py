"""The simulated cluster: nodes of Pumps, a client that enqueues, an operator, the hint bus, and one store.

A run has two phases. In the *workload* phase the client enqueues the scenario's jobs and every fault the
plan decides is injected: nodes crash, shut down, lose the store or freeze; clocks skew; hints are lost,
doubled or late; store calls fail before or after they commit; handlers fail, crawl or hang; the operator
pauses, limits, cancels and requeues; the database goes down for everyone; schedules are paused, resumed
and run now. Then the faults stop, what is broken heals (partitions end, clocks are corrected, stopped nodes
come back, queues are resumed), and the *drain* phase must bring every job to a terminal state within the
scenario's bound. A scenario with schedules first lets them mint on: once every node is back up, for
``SETTLE`` seconds more (every Pump loads its schedules when it starts, then each maintenance interval),
then checks that each kept up and pauses them all, so that the drain can end.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..core import elastic
from ..core import events as ev
from ..core.driver import FINAL_FLUSH_WINDOW, STOP_WINDOW, NodeDriver
from ..store.memory import MemoryStore, TransientFault
from .actors import Client, Operator
from .calendar import ROUTABLE, definitions
from .connection import LATE_COMMIT_MAX, Connection
from .invariants import Checker, Violation
from .plan import FaultPlan, Params
from .pump import SimPump
from .scenario import GroupSpec, Scenario
from .timeline import Timeline, us

#: A run that needs more actions than this is stuck in a loop that virtual time does not advance.
MAX_ACTIONS = 2_000_000
#: A node whose start failed (its schedule sync met a store fault) is started again this much later.
RETRY_START = us(1.0)
#: With schedules, the healed cluster mints this long once every node is up, before the drain stops minting.
SETTLE = us(10.0)
#: The grace of an extra Pump that lets go (shell.node.Node.adapt gives the group's SHUTDOWN_GRACE).
LET_GO_GRACE = 5.0


class Cluster:
    def __init__(
        self,
        scenario: Scenario,
        plan: FaultPlan,
        *,
        store_class: type[MemoryStore] = MemoryStore,
        driver_class: type[NodeDriver] = NodeDriver,
        tracing: bool = False,
    ) -> None:
        self.scenario, self.plan, self.driver_class = scenario, plan, driver_class
        self.timeline = Timeline(scenario.start)
        self.checker = Checker(lambda: self.timeline.now)
        self.checker.routable = lambda wire_name: wire_name == ROUTABLE
        self.checker.features.fault_before = lambda: self.armed[0]
        self.checker.schedules.no_overlap = frozenset(
            s.name for s in scenario.schedules if s.settings.get("NO_OVERLAP")
        )
        self.schedules = {s.name: s for s in scenario.schedules}
        self.minting = bool(scenario.schedules)  # until the drain stops the schedules
        self.outage_until = 0  # the database is down for everyone until then
        self.armed = (False, False)  # the store faults of the call being made: (before, after)
        self.store = store_class(faults=self._store_fault, hints=self._hint, observe=self.checker.on_change)
        self.checker.dependencies.edges = self.store.list_edges
        self.tracing = tracing
        self.lines: list[str] = []
        self.steps = 0
        self.draining = False
        self.nodes = [Node(self, i) for i in range(scenario.nodes)]
        self.client = Client(self)
        self.operator = Operator(self)

    def note(self, who: str, text: str) -> None:
        if self.tracing:
            self.lines.append(f"{self.timeline.now / 1e6:12.6f} {who:<10} {text}")

    def _store_fault(self, operation: str, when: str) -> None:
        if self.armed[when == "after"]:
            raise TransientFault(f"injected fault {when} {operation}")

    def run(self) -> None:
        """Run the scenario to the end of its drain; raises :class:`Violation` at the first one."""
        scenario, timeline = self.scenario, self.timeline
        self.operator.setup()
        for node in self.nodes:
            node.schedule_faults()
            node.start()
        self.client.schedule()
        self.operator.schedule()
        self._schedule_outages()
        timeline.at(us(scenario.workload), self._drain)
        deadline = us(scenario.workload + scenario.drain_bound)
        while timeline.run_next():
            if timeline.actions > MAX_ACTIONS:
                self.checker.fail("NoLivelock", f"{MAX_ACTIONS} actions and the run is still going")
            if self.draining and not self.minting and self.client.pending == 0 and self.checker.live == 0:
                break
            if timeline.now > deadline:
                break
        self.checker.audit(
            self.store.all_jobs(),
            drained=True,
            schedules=self.store.list_schedules(),
            tags=self.store.all_tags(),
        )

    def _schedule_outages(self) -> None:
        workload = self.scenario.workload
        for _ in range(2):
            params = self.plan.decide(
                "outage",
                "cluster",
                lambda r: {
                    "at": round(r.uniform(0.0, workload), 3),
                    "length": round(r.uniform(3.0, 40.0), 3),
                },
            )
            if params is not None:
                self.timeline.at(us(float(params["at"])), self._outage, params)

    def _outage(self, params: Params) -> None:
        self.note("cluster", f"FAULT outage: the database is down for {params['length']}s")
        self.outage_until = max(self.outage_until, self.timeline.now + us(float(params["length"])))

    def _drain(self) -> None:
        self.note("cluster", "the workload ends: faults stop and heal, the drain begins")
        self.draining = True
        self.plan.active = False
        self.outage_until = min(self.outage_until, self.timeline.now)
        for node in self.nodes:
            node.heal()
        self.operator.drain()
        # A write sent before the faults stopped may still commit late (a pause, say): resume again after.
        self.timeline.after(us(LATE_COMMIT_MAX) + 1, self.operator.drain)
        if self.minting:
            self._settle()

    def _settle(self) -> None:
        """Once every node is up again (those shut down or crashed late come back), SETTLE more seconds."""
        if all(node.up and not node.stopping for node in self.nodes):
            self.timeline.after(SETTLE, self._stop_minting)
        else:
            self.timeline.after(us(1.0), self._settle)

    def _stop_minting(self) -> None:
        """The healed cluster had SETTLE seconds: each schedule kept up; now they stop, so the drain ends."""
        store, now = self.store, self.timeline.wall()
        self.note("cluster", "the schedules kept up? then they are paused for the drain")
        self.checker.schedules.keeping_up(store.list_schedules(), now)
        for view in store.list_schedules():
            store.pause_schedule(view.name, actor="drain", now=now)
        self.minting = False

    # -- wake-up hints ------------------------------------------------------------------------------

    def _hint(self, queues: Sequence[str]) -> None:
        """The store made jobs due in ``queues``: each Pump serving one hears of it, or not, late, twice."""
        plan, wanted = self.plan, set(queues)
        for node in self.nodes:
            for pump in node.pumps:
                if not pump.alive or not wanted.intersection(pump.spec.queues):
                    continue
                lost = plan.flag("hint-lost", pump.site)
                late = plan.decide(
                    "hint-late", pump.site, lambda r: {"delay": round(r.uniform(0.25, 5.0), 3)}
                )
                dup = plan.decide("hint-dup", pump.site, lambda r: {"gap": round(r.uniform(0.0, 2.0), 3)})
                if lost:
                    self.note(pump.site, "FAULT hint-lost")
                    continue
                delay = us(float(late["delay"])) if late else 1000
                self.timeline.after(delay, pump.request_poll)
                if dup is not None:
                    self.timeline.after(delay + us(float(dup["gap"])), pump.request_poll)


class Node:
    """One worker process: a Pump per group and per ``pumps``, restarted with new worker ids."""

    def __init__(self, sim: Cluster, index: int) -> None:
        self.sim, self.index = sim, index
        self.site = f"node{index}"
        self.skew = 0  # microseconds its clock runs ahead
        self.generation = 0
        self.pumps: list[SimPump] = []
        self.up = False
        self.stopping = False
        self.disturbed = False  # something the Driver cannot help happened during a shutdown
        self.partitioned_until = 0
        self.stalled_until = 0
        self.conn = Connection(sim, self.site)  # the start's schedule sync
        self.added = 0  # extra Pumps started in this generation (each gets an index of its own)
        self.heals = 0

    def wall(self, at: int | None = None) -> datetime:
        return self.sim.timeline.wall(self.skew, at)

    def schedule_faults(self) -> None:
        """Decide this node's faults for the workload phase, always in the same order."""
        plan, site, workload = self.sim.plan, self.site, self.sim.scenario.workload
        lease = min(g.lease for g in self.sim.scenario.groups)
        skew = plan.decide("skew", site, lambda r: {"seconds": round(r.uniform(-lease / 2, lease / 2), 3)})
        self.skew = us(float(skew["seconds"])) if skew else 0

        def at(rng: random.Random, **more: float) -> Params:
            return {"at": round(rng.uniform(0.0, workload), 3), **{k: round(v, 3) for k, v in more.items()}}

        for _ in range(2):
            self._at(plan.decide("crash", site, lambda r: at(r, down=r.uniform(1, 30))), self._crash)
        grace = (0.0, 0.5, 2.0, 5.0, 15.0)
        shutdown = plan.decide(
            "shutdown", site, lambda r: at(r, grace=r.choice(grace), restart=r.uniform(1, 20))
        )
        self._at(shutdown, self._shutdown)
        for _ in range(2):
            self._at(
                plan.decide("partition", site, lambda r: at(r, length=r.uniform(1, 60))), self._partition
            )
        for _ in range(2):
            self._at(plan.decide("stall", site, lambda r: at(r, length=r.uniform(0.5, 45))), self._stall)

    def _at(self, params: Params | None, action: Callable[[Params], None]) -> None:
        if params is not None:
            self.sim.timeline.at(us(float(params["at"])), action, params)

    # -- life and death ------------------------------------------------------------------------------

    def start(self) -> None:
        self.generation += 1
        self.up, self.stopping = True, False
        self.pumps, self.added = [], 0
        if not self._sync_schedules():
            self.up = False  # the process exits; its supervisor starts it again
            self.sim.timeline.after(RETRY_START, self._restart)
            return
        self.pumps = [SimPump(self.sim, self, g, i) for g in self.sim.scenario.groups for i in range(g.pumps)]
        for pump in self.pumps:
            pump.open()

    def _sync_schedules(self) -> bool:
        """``shell.node.Node.start``: store the schedules of this node's settings (those of the moment it
        starts: a deploy may have added or removed some). A scenario without schedules has nothing to sync."""
        sim = self.sim
        if not sim.scenario.schedules:
            return True
        wanted = definitions(sim.scenario.schedules, sim.timeline.now / 1e6)
        try:
            result = self.conn.call(sim.store.sync_schedules, definitions=wanted, now=self.wall())
        except Violation:
            raise
        except Exception:
            sim.note(self.site, "start failed: the schedule sync met a store fault")
            return False
        sim.note(self.site, f"schedules synced: {result}")
        return True

    def _restart(self) -> None:
        if not self.up:
            self.start()

    def _crash(self, params: Params) -> None:
        if not self.up:
            return
        self.sim.note(self.site, f"FAULT crash: the process dies, back in {params['down']}s")
        self._kill()
        self.sim.timeline.after(us(float(params["down"])), self._restart)

    def _kill(self) -> None:
        for pump in self.pumps:
            pump.kill()
        self.up = False

    def _shutdown(self, params: Params) -> None:
        if not self.up or self.stopping:
            return
        grace = float(params["grace"])
        self.sim.note(self.site, f"FAULT shutdown with a grace of {grace}s")
        self.stopping, self.disturbed = True, self.stalled_until > self.sim.timeline.now
        for pump in self.pumps:
            pump.post(ev.ShutdownRequested(now=self.wall(), grace=timedelta(seconds=grace)))
        windows = (STOP_WINDOW + FINAL_FLUSH_WINDOW).total_seconds()
        hard_stop = us(grace + windows + 5.0)  # shell.node.Node.stop gives up waiting then
        self.sim.timeline.after(hard_stop, self._stopped, self.generation, float(params["restart"]))

    def _stopped(self, generation: int, restart: float) -> None:
        if generation != self.generation or not self.stopping:
            return
        running = [p.worker_id for p in self.pumps if p.alive]
        if running and not self.disturbed:
            self.sim.checker.fail(
                "ShutdownBounded", f"{running} still running when {self.site}'s shutdown ended"
            )
        self._kill()
        self.sim.timeline.after(us(restart), self._restart)

    # -- the elastic group (core.elastic) --------------------------------------------------------------

    def adapt(self) -> None:
        """``shell.node.Node.adapt``: grow or shrink each group between PUMPS and MAX_PUMPS, held to the rule
        as the simulator counts the claims itself (PumpsGrowOnlyWhenStarved)."""
        if not self.up or self.stopping:
            return
        now = self.wall()
        for spec in self.sim.scenario.groups:
            running = [p for p in self.pumps if p.spec is spec and not p.leaving]
            if spec.ceiling <= spec.pumps or not all(p.alive for p in running):
                continue
            loads = [p.driver.starvation for p in running]
            change = elastic.resize(loads, floor=spec.pumps, ceiling=spec.ceiling, now=now)
            if change:
                self._check_resize(spec, running, change, now)
            if change > 0:
                pump = SimPump(self.sim, self, spec, spec.pumps + self.added)
                self.added += 1
                self.pumps.append(pump)
                pump.open()
            elif change < 0:
                self._let_go(max(running, key=lambda p: p.index), now)

    def _check_resize(self, spec: GroupSpec, running: list[SimPump], change: int, now: datetime) -> None:
        if change > 0:
            starved = all(p.starved_in_a_row >= elastic.STARVED_AFTER for p in running)
            ok, why = starved and len(running) < spec.ceiling, "while not every Pump was starved"
        else:
            since = [p.last_starved for p in running if p.last_starved is not None]
            calm = all(now - at >= elastic.RETIRE_AFTER for at in since)
            ok, why = calm and len(running) > spec.pumps, "while a Pump was starved of late"
        self.sim.checker.expect(
            ok,
            "PumpsGrowOnlyWhenStarved",
            lambda: (
                f"{self.site} resized {spec.name} by {change:+d} from {len(running)} Pumps "
                f"(PUMPS {spec.pumps}, MAX_PUMPS {spec.ceiling}) {why}"
            ),
        )

    def _let_go(self, pump: SimPump, now: datetime) -> None:
        pump.leaving = True
        self.sim.note(self.site, f"pump {pump.worker_id} lets go: no backlog")
        pump.post(ev.ShutdownRequested(now=now, grace=timedelta(seconds=LET_GO_GRACE)))
        windows = (STOP_WINDOW + FINAL_FLUSH_WINDOW).total_seconds()
        bound = us(LET_GO_GRACE + windows + 5.0)
        began = self.sim.timeline.now
        self.sim.timeline.after(bound, self._let_go_ended, pump, self.generation, self.heals, began)

    def _let_go_ended(self, pump: SimPump, generation: int, heals: int, began: int) -> None:
        """A Pump let go ends as a shutdown does, within its grace and the Driver's windows (ShutdownBounded),
        unless its loop was frozen meanwhile, or its clock set back (a heal)."""
        disturbed = self.stalled_until > began or heals != self.heals
        if generation == self.generation and self.up and pump.alive and not disturbed:
            self.sim.checker.fail("ShutdownBounded", f"{pump.worker_id} still running after letting go")

    def pump_ended(self, pump: SimPump) -> None:
        if pump.leaving and self.up:  # shell.node.Node.adapt forgets the status of a Pump that let go
            self.pumps.remove(pump)
            self.sim.store.forget_pump(pump.worker_id)
        if self.stopping and not any(p.alive for p in self.pumps):
            self.up = False  # backwave_pump returns: the process exits; it comes back at its restart

    def _partition(self, params: Params) -> None:
        until = self.sim.timeline.now + us(float(params["length"]))
        self.sim.note(self.site, f"FAULT partition for {params['length']}s")
        self._cut_off_until(max(self.partitioned_until, until))

    def _cut_off_until(self, until: int) -> None:
        self.partitioned_until = self.conn.partitioned_until = until
        for pump in self.pumps:
            pump.cut_off_until(until)

    def _stall(self, params: Params) -> None:
        self.sim.note(self.site, f"FAULT stall: the loops freeze for {params['length']}s")
        self.stalled_until = max(self.stalled_until, self.sim.timeline.now + us(float(params["length"])))
        self.disturbed = True  # a frozen loop cannot keep a shutdown's deadlines

    def heal(self) -> None:
        """The workload is over: the network and clock come back, and a halted process is restarted."""
        now = self.sim.timeline.now
        self._cut_off_until(min(self.partitioned_until, now))
        self.stalled_until = min(self.stalled_until, now)
        self.disturbed = self.disturbed or self.skew != 0  # a clock set back delays the Driver's deadlines
        self.skew = 0
        self.heals += 1
        for pump in self.pumps:
            pump.kick()
        if self.up and not self.stopping and not all(p.alive for p in self.pumps):
            self.sim.note(self.site, "restarted: a halted pump needs a new process")
            self._kill()
            self.start()
