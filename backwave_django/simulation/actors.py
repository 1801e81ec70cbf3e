"""The cluster's users: the application that enqueues (the client) and someone at the admin (the operator).

The client enqueues each job of the scenario at its time, at least once: a failed enqueue is tried again, so a
write that committed but lost its reply makes a second job, as it would in production (unless the job has a
unique key: the retry then comes back as a duplicate naming the first, while it is unfinished). An enqueue
that comes back as a duplicate is acknowledged like any other. The operator sets
queue limits and pauses from the start, then acts at random moments: on queues (pause, resume, set or clear a
limit), on jobs (cancel, requeue) and on schedules (pause, resume, run now).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from ..core.dependencies import RunOn
from ..core.states import State
from ..store.contract import NewJob, UnknownParent
from .connection import Connection
from .invariants import Violation
from .plan import Params
from .scenario import JobSpec
from .timeline import us

if TYPE_CHECKING:
    from .cluster import Cluster

OPERATOR_ACTIONS = ("pause", "resume", "limit", "unlimit", "cancel", "requeue")
SCHEDULE_ACTIONS = ("pause", "resume", "trigger")
RETRY_ENQUEUE = us(1.0)


class Client:
    """The application: enqueues each job of the scenario at its time, retrying until it is acknowledged."""

    def __init__(self, sim: Cluster) -> None:
        self.sim = sim
        self.conn = Connection(sim, "client")
        self.pending = 0
        self.ids: dict[int, int] = {}  # spec key -> the job id its acknowledged enqueue returned
        self.gone: set[int] = set()  # keys whose job was purged before a child named it

    def schedule(self) -> None:
        for spec in self.sim.scenario.jobs:
            self.pending += 1
            self.sim.timeline.at(us(spec.at), self._enqueue, spec)

    def _enqueue(self, spec: JobSpec) -> None:
        now = self.sim.timeline.wall()
        wanted = [key for key in spec.parents if key not in self.gone]
        if any(key not in self.ids for key in wanted):  # a parent's enqueue is not acknowledged yet
            self.sim.timeline.after(RETRY_ENQUEUE, self._enqueue, spec)
            return
        new = NewJob(
            wire_name=spec.wire_name, payload=str(spec.key), queue=spec.queue,
            due_at=now + timedelta(seconds=spec.delay), max_attempts=spec.max_attempts,
            timeout=None if spec.timeout is None else timedelta(seconds=spec.timeout),
            priority=spec.priority, unique_key=spec.unique_key,
            trace_context=f'{{"traceparent":"00-{spec.key + 1:032x}-{spec.key + 1:016x}-01"}}',
            parents=tuple(self.ids[key] for key in wanted), run_on=RunOn(spec.run_on),
        )  # fmt: skip
        try:
            ids = self.conn.call(  # the registry's way in: jobs made on the store's demand
                self.sim.store.enqueue_in_parts, count=1, make=lambda start, stop: [new], now=now,
                max_payload_bytes=65536,
            )  # fmt: skip
        except Violation:
            raise
        except UnknownParent as exc:  # retention purged a parent first: wait on the others only
            alive = [job_id for job_id in exc.missing if job_id in self.sim.checker.jobs]
            self.sim.checker.expect(
                not alive, "StoreSound", lambda: f"client: enqueue refused parents {alive}, which exist"
            )
            self.gone |= {key for key in wanted if self.ids[key] in exc.missing}
            self.sim.timeline.after(RETRY_ENQUEUE, self._enqueue, spec)
            return
        except Exception:  # at-least-once: try again (a write that committed makes a second job)
            self.sim.timeline.after(RETRY_ENQUEUE, self._enqueue, spec)
            return
        self.sim.checker.accepted(e.id for e in ids)
        self.ids[spec.key] = ids[0].id
        self.sim.checker.features.enqueued(new, ids[0])
        duplicate = f" (a duplicate: {spec.unique_key} is held)" if ids[0].duplicate else ""
        self.sim.note("client", f"enqueued key {spec.key} as job {ids[0].id} in {spec.queue}{duplicate}")
        self.pending -= 1


class Operator:
    """Someone at the admin: queue settings from the start, then actions at random moments."""

    def __init__(self, sim: Cluster) -> None:
        self.sim = sim
        self.conn = Connection(sim, "operator", committed=self._refresh)

    def _refresh(self) -> None:
        self.sim.checker.queues_changed(self.sim.store.list_queues())

    def setup(self) -> None:
        store, now = self.sim.store, self.sim.timeline.wall()
        for queue, limit in sorted(self.sim.scenario.limits.items()):
            store.set_concurrency_limit(queue, limit, actor="setup", now=now)
        for queue in self.sim.scenario.paused:
            store.pause_queue(queue, actor="setup", now=now)
        self._refresh()

    def schedule(self) -> None:
        workload = self.sim.scenario.workload
        for _ in range(self.sim.scenario.operator_slots):
            params = self.sim.plan.decide(
                "operator",
                "cluster",
                lambda r: {
                    "at": round(r.uniform(0.0, workload), 3), "action": r.choice(OPERATOR_ACTIONS),
                    "queue": r.randrange(4), "limit": r.randint(0, 3), "pick": round(r.random(), 6),
                },
            )  # fmt: skip
            if params is not None:
                self.sim.timeline.at(us(float(params["at"])), self._act, params)
        for _ in range(self.sim.scenario.schedule_slots):
            params = self.sim.plan.decide(
                "schedule-op",
                "cluster",
                lambda r: {
                    "at": round(r.uniform(0.0, workload), 6), "action": r.choice(SCHEDULE_ACTIONS),
                    "pick": round(r.random(), 6),
                },
            )  # fmt: skip
            if params is not None:
                self.sim.timeline.at(us(float(params["at"])), self._operate_schedule, params)

    def _operate_schedule(self, params: Params) -> None:
        """Pause, resume or run now one of the schedules (at a microsecond no tick falls on)."""
        sim, store, now = self.sim, self.sim.store, self.sim.timeline.wall()
        names = sorted(sim.schedules)
        name, action = names[int(float(params["pick"]) * len(names))], str(params["action"])
        sim.note("operator", f"{action} schedule {name}")
        operation = {
            "pause": store.pause_schedule, "resume": store.resume_schedule, "trigger": store.trigger_schedule,
        }[action]  # fmt: skip
        try:
            self.conn.call(operation, name=name, actor="operator", now=now)
        except Violation:
            raise
        except Exception:  # the operator sees an error; it may or may not have committed
            pass

    def _act(self, params: Params) -> None:
        sim, store, now = self.sim, self.sim.store, self.sim.timeline.wall()
        queues = sim.scenario.queues
        queue, action = queues[int(params["queue"]) % len(queues)], str(params["action"])
        sim.note("operator", f"{action} {queue if action in OPERATOR_ACTIONS[:4] else ''}")
        call = self.conn.call
        try:
            if action == "pause":
                call(store.pause_queue, queue=queue, actor="operator", now=now)
            elif action == "resume":
                call(store.resume_queue, queue=queue, actor="operator", now=now)
            elif action in ("limit", "unlimit"):
                limit = int(params["limit"]) if action == "limit" else None
                call(store.set_concurrency_limit, queue=queue, limit=limit, actor="operator", now=now)
            elif (job_id := self._pick(action, float(params["pick"]))) is not None:
                self._on_job(action, job_id)
        except Violation:
            raise
        except Exception:  # the operator sees an error; it may or may not have committed
            pass

    def _on_job(self, action: str, job_id: int) -> None:
        sim, store, now = self.sim, self.sim.store, self.sim.timeline.wall()
        if action == "cancel":
            self.conn.call(store.cancel, job_id=job_id, actor="operator", now=now)
            return
        result = self.conn.call(store.requeue, job_id=job_id, actor="operator", now=now)
        sim.checker.features.requeued(job_id, result)  # KEY_TAKEN is an answer: another job holds its key

    def _pick(self, action: str, pick: float) -> int | None:
        """A job to cancel (any), or to requeue (one that ended badly; half the time one with a unique key,
        when there is one, so that a requeue meets a key taken again)."""
        jobs = self.sim.checker.jobs
        ended = (State.DEAD_LETTERED, State.QUARANTINED)
        candidates = sorted(i for i, j in jobs.items() if action == "cancel" or j.state in ended)
        keyed = [i for i in candidates if action != "cancel" and jobs[i].unique_key is not None]
        if keyed and pick < 0.5:
            candidates, pick = keyed, pick * 2
        candidates = candidates or sorted(jobs)
        return candidates[int(pick * len(candidates))] if candidates else None

    def drain(self) -> None:
        """Before the drain: every queue resumed, and no limit of zero left."""
        store, now = self.sim.store, self.sim.timeline.wall()
        for view in store.list_queues():
            if view.paused:
                store.resume_queue(view.queue, actor="drain", now=now)
            if view.concurrency_limit == 0:
                store.set_concurrency_limit(view.queue, None, actor="drain", now=now)
        self._refresh()
