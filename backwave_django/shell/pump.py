"""The Pump: one thread, one event queue, one Node Driver, one pool of worker threads, one worker id.

The loop takes one event at a time, asks the Driver what to do, and obeys: store calls run one at a time on
this thread's own connection; handlers run in the pool and report back by putting an event on the queue.
Timers are deadlines checked by the loop itself (poll, heartbeat, maintenance), so no ticker thread can die
silently. Polls pass through one gate that coalesces ticks and hints into a single pending poll and queues
none while the pool is full.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections
from django.utils import timezone

from .. import codec, wakeups
from ..conf import GroupSettings
from ..context import JobContext
from ..core import commands as cmd
from ..core import events as ev
from ..core.driver import DriverConfig, NodeDriver
from ..core.records import ClaimedJob
from ..core.retry import RetryPolicy
from ..registry import Registry, UnknownJob
from ..store import get_store
from .faults import is_transient
from .scope import AttemptResult, run_attempt
from .workers import WorkerPool

logger = logging.getLogger("backwave.pump")

RUNNING, DEGRADED, HALTED, STOPPED = "running", "degraded", "halted", "stopped"


def new_worker_id(group: str) -> str:
    """Unique per Pump instance, so a restarted process never reuses one: host:pid:group:suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{group}:{uuid.uuid4().hex[:8]}"


@dataclass(slots=True, eq=False)
class _Running:
    """One Attempt in the pool. ``token`` tells the handler to stop; the marks say why."""

    job: ClaimedJob
    token: threading.Event = field(default_factory=threading.Event)
    operator_cancel: bool = False


class _Marker:
    """A timer or hint, turned into an event with ``now`` when the loop dequeues it."""

    def __init__(self, name: str, build: Callable[[datetime], ev.Event]) -> None:
        self.name, self.build = name, build

    def __repr__(self) -> str:
        return f"<{self.name}>"


POLL = _Marker("poll", lambda now: ev.PollDue(now=now))
HEARTBEAT = _Marker("heartbeat", lambda now: ev.HeartbeatDue(now=now))
MAINTENANCE = _Marker("maintenance", lambda now: ev.MaintenanceDue(now=now))
SHUTDOWN = _Marker("shutdown", lambda now: ev.ShutdownRequested(now=now))
GRACE = _Marker("grace", lambda now: ev.GraceExpired(now=now))


class Pump:
    """One claim -> execute -> report loop for a worker group."""

    def __init__(
        self,
        group: GroupSettings,
        *,
        registry: Registry,
        retry: RetryPolicy,
        using: str = "default",
        index: int = 0,
        hints: bool = True,
        clock: Callable[[], datetime] = timezone.now,
    ) -> None:
        self.group = group
        self.index = index
        self.registry = registry
        self.store = get_store(using)
        self.clock = clock
        self.hints = hints
        self.worker_id = new_worker_id(group.name)
        self.driver = NodeDriver(
            DriverConfig(
                policy=group.new_policy(),
                pool_size=group.pool_size,
                max_claim_batch=group.max_claim_batch,
                max_outcome_batch=group.max_outcome_batch,
                lease_duration=group.lease_duration,
                maintenance_interval=group.maintenance_interval,
                retry=retry,
            )
        )
        self.health = RUNNING
        self.health_detail = ""
        self.started_at: datetime | None = None
        self.processed = 0  # outcomes written that applied
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._gate = threading.Lock()
        self._poll_pending = False
        self._inflight: dict[int, _Running] = {}
        self._details: dict[tuple[int, int], str] = {}
        self._pool: WorkerPool | None = None  # started with the pump
        self._thread = threading.Thread(
            target=self._run, name=f"backwave-pump-{group.name}-{index}", daemon=True
        )
        self._hint_token: int | None = None
        self._shutting_down = False
        self._done = threading.Event()

    # -- lifecycle (called from other threads) ------------------------------------------------------

    def start(self) -> None:
        self.started_at = self.clock()
        self._pool = WorkerPool(self.group.pool_size, f"backwave-{self.group.name}-{self.index}")
        if self.hints:
            self._hint_token = wakeups.subscribe(self.group.queues, self.request_poll)
        self._thread.start()

    def request_poll(self) -> None:
        """The poll gate: at most one poll pending, and none while every worker slot is busy."""
        with self._gate:
            if self._poll_pending or len(self._inflight) >= self.group.pool_size or self._shutting_down:
                return
            self._poll_pending = True
        self._events.put(POLL)

    def shutdown(self) -> None:
        """Stop claiming and drain: running handlers may finish until :meth:`expire_grace`."""
        self._shutting_down = True
        self._events.put(SHUTDOWN)

    def expire_grace(self) -> None:
        """Give back the leases of whatever still runs, so other nodes take it at once."""
        self._events.put(GRACE)

    def join(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def alive(self) -> bool:
        return not self._done.is_set()

    @property
    def busy(self) -> bool:
        """Something is running, buffered, being reported, or being claimed."""
        return self.driver.occupied > 0 or bool(self._inflight)

    # -- the loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        self._record_status()
        interval = self.group.poll_interval.total_seconds()
        beat = self.group.heartbeat_interval.total_seconds()
        maintenance = self.group.maintenance_interval.total_seconds()
        start = time.monotonic()
        deadlines = {POLL: start, HEARTBEAT: start + beat, MAINTENANCE: start}
        periods = {POLL: interval, HEARTBEAT: beat, MAINTENANCE: maintenance}
        try:
            while not self.driver.stopped and self.health != HALTED:
                if self.driver.buffer and self._events.empty():
                    # A burst of completions has been absorbed: flush them and refill in one pass. Under
                    # load this batches outcomes and claims by itself; when idle it costs one poll.
                    self.request_poll()
                wait = max(0.0, min(deadlines.values()) - time.monotonic())
                try:
                    item = self._events.get(timeout=wait)
                except queue.Empty:
                    item = None
                current = time.monotonic()
                for marker, deadline in deadlines.items():
                    if current >= deadline:
                        deadlines[marker] = current + periods[marker]
                        self._tick(marker)
                if item is not None:
                    self._handle(item)
        except Exception as exc:  # a bug in the loop itself: halt this pump loudly, never the process
            self._fault(exc, transient_ok=False)
        finally:
            self._finish()

    def _tick(self, marker: _Marker) -> None:
        if marker is POLL:
            self.request_poll()
        elif not self._shutting_down or marker is HEARTBEAT:
            self._events.put(marker)
        if marker is HEARTBEAT:
            self._record_status()

    def _handle(self, item: Any) -> None:
        if isinstance(item, _Marker):
            if item is POLL:
                with self._gate:
                    self._poll_pending = False  # a hint arriving from now on re-arms the next poll
            event = item.build(self.clock())
        else:
            event = item
        try:
            commands = self.driver.step(event)
        except Exception as exc:  # the Driver raises only on a broken invariant
            self._fault(exc, transient_ok=False)
            return
        ran_io = False
        for position, command in enumerate(commands):
            try:
                ran_io |= self._obey(command)
            except Exception as exc:
                self._answer_unissued(commands[position:])
                self._fault(exc)
                return
        if ran_io and self.health == DEGRADED:  # only a real round-trip proves the store is back
            self._set_health(RUNNING, "")

    def _obey(self, command: cmd.Command) -> bool:
        """Run one command; returns whether it made a store round-trip."""
        now = self.clock()
        store = self.store
        match command:
            case cmd.ClaimBatch(queues=queues, max_jobs=max_jobs, lease_duration=lease):
                jobs = store.claim(
                    worker_id=self.worker_id, queues=queues, max_jobs=max_jobs, lease_duration=lease, now=now
                )
                self._events.put(ev.ClaimCompleted(now=self.clock(), jobs=tuple(jobs)))
            case cmd.ExecuteJob(job=job):
                self._execute(job)
                return False
            case cmd.ReportOutcomes(reports=reports):
                details = {
                    r.job_id: d for r in reports if (d := self._details.pop((r.job_id, r.attempt), ""))
                }
                result = store.report(worker_id=self.worker_id, reports=reports, now=now, details=details)
                self.processed += len(result.applied)
                if result.stale:
                    logger.warning(
                        "%s: outcomes for jobs %s were fenced off (lease lost)",
                        self.worker_id,
                        sorted(result.stale),
                    )
                self._events.put(
                    ev.OutcomesReported(now=self.clock(), applied=result.applied, stale=result.stale)
                )
            case cmd.Heartbeat(job_ids=job_ids, lease_duration=lease):
                results = store.heartbeat(
                    worker_id=self.worker_id, job_ids=job_ids, lease_duration=lease, now=now
                )
                self._events.put(ev.HeartbeatCompleted(now=self.clock(), results=tuple(results)))
            case cmd.ExpireLeases(queues=queues, max_jobs=max_jobs, retry=retry):
                count = store.expire_leases(queues=queues, max_jobs=max_jobs, retry=retry, now=now)
                if count:
                    logger.info("%s: ended %d Attempts whose leases lapsed", self.worker_id, count)
                self._events.put(ev.LeasesExpired(now=self.clock(), count=count))
            case cmd.ReleaseLeases(job_ids=job_ids):
                count = store.release(worker_id=self.worker_id, job_ids=job_ids, now=now)
                logger.info("%s: released %d unfinished jobs at shutdown", self.worker_id, count)
                self._events.put(ev.LeasesReleased(now=self.clock()))
            case cmd.SignalCancellation(job_id=job_id):
                if running := self._inflight.get(job_id):
                    running.operator_cancel = True
                    running.token.set()
                return False
            case cmd.AbandonExecution(job_id=job_id):
                with self._gate:
                    running = self._inflight.pop(job_id, None)
                if running:
                    running.token.set()
                return False
            case cmd.RequestPoll():
                with self._gate:
                    if self._poll_pending:
                        return False
                    self._poll_pending = True
                self._events.put(POLL)  # at the back of the queue, never inline
                return False
            case cmd.Stop():
                return False
        return True

    def _answer_unissued(self, commands: list[cmd.Command]) -> None:
        """After a fault: every command that owes the Driver a reply gets a failed one, and the jobs already
        claimed still start, so no reservation or execution is stranded."""
        now = self.clock()
        for command in commands:
            match command:
                case cmd.ClaimBatch():
                    self._events.put(ev.ClaimCompleted(now=now, failed=True))
                case cmd.ReportOutcomes():
                    self._events.put(ev.OutcomesReported(now=now, failed=True))
                case cmd.Heartbeat():
                    self._events.put(ev.HeartbeatCompleted(now=now, failed=True))
                case cmd.ExpireLeases():
                    self._events.put(ev.LeasesExpired(now=now, count=0, failed=True))
                case cmd.ReleaseLeases():
                    self._events.put(ev.LeasesReleased(now=now, failed=True))
                case _:
                    try:
                        self._obey(command)
                    except Exception:  # pragma: no cover - these commands do no I/O
                        logger.exception("%s: could not obey %r after a fault", self.worker_id, command)

    def _fault(self, exc: Exception, *, transient_ok: bool = True) -> None:
        if transient_ok and is_transient(exc):
            logger.warning("%s: transient database fault, retrying next tick: %s", self.worker_id, exc)
            self._set_health(DEGRADED, f"{type(exc).__name__}: {exc}")
            connections[self.store.using].close()  # reconnect on the next round-trip
            return
        logger.critical(
            "%s: halted by %s: %s. Its leases will lapse and other nodes will take the work.",
            self.worker_id, type(exc).__name__, exc, exc_info=exc,
        )  # fmt: skip
        self._set_health(HALTED, f"{type(exc).__name__}: {exc}")

    # -- handlers, off the loop ------------------------------------------------------------------------

    def _execute(self, job: ClaimedJob) -> None:
        try:
            registration = self.registry.get(job.wire_name)
            arguments = registration.decode(job.payload)
        except (UnknownJob, codec.PayloadDecodeError) as exc:
            self._events.put(ev.ExecutionUnroutable(now=self.clock(), job_id=job.id, reason=str(exc)))
            return
        running = _Running(job)
        with self._gate:
            self._inflight[job.id] = running
        context = JobContext(
            job_id=job.id,
            attempt=job.attempt,
            wire_name=job.wire_name,
            queue=job.queue,
            max_attempts=job.max_attempts,
            worker_id=self.worker_id,
            cancelled=running.token,
        )
        assert self._pool is not None, "the pump was not started"
        self._pool.submit(self._attempt, running, registration, arguments, context)

    def _attempt(
        self, running: _Running, registration: Any, arguments: dict[str, Any], context: JobContext
    ) -> None:
        job = running.job
        try:
            result = run_attempt(registration, arguments, context)
        except BaseException as exc:  # never leave a job without an outcome, whatever broke
            result = AttemptResult(error=exc, detail=f"{type(exc).__name__}: {exc}")
        with self._gate:
            ours = self._inflight.get(job.id) is running
            if ours:
                del self._inflight[job.id]
        if not ours:
            return  # abandoned: the lease is gone, so is this result
        now = self.clock()
        if result.error is None:
            event: ev.Event = ev.ExecutionSucceeded(now=now, job_id=job.id)
        elif running.operator_cancel:
            event = ev.ExecutionCancelled(now=now, job_id=job.id)
        else:
            self._details[(job.id, job.attempt)] = result.detail
            event = ev.ExecutionFailed(now=now, job_id=job.id, message=result.message)
            logger.warning(
                "job %s (%s) attempt %d/%d failed: %s",
                job.id, job.wire_name, job.attempt, job.max_attempts, result.message,
            )  # fmt: skip
        self._events.put(event)

    # -- health ----------------------------------------------------------------------------------------

    def _set_health(self, health: str, detail: str) -> None:
        if (health, detail) == (self.health, self.health_detail):
            return
        self.health, self.health_detail = health, detail
        self._record_status()

    def _record_status(self) -> None:
        try:
            self.store.record_pump(
                worker_id=self.worker_id,
                group=self.group.name,
                queues=self.group.queues,
                health=self.health,
                detail=self.health_detail,
                started_at=self.started_at or self.clock(),
                now=self.clock(),
            )
        except Exception as exc:  # health bookkeeping must never take the pump down
            logger.warning("%s: could not record pump status: %s", self.worker_id, exc)
            if is_transient(exc):
                connections[self.store.using].close()

    def _finish(self) -> None:
        if self._hint_token is not None:
            wakeups.unsubscribe(self._hint_token)
        if self.health == HALTED:
            for running in list(self._inflight.values()):
                running.token.set()  # its results will not be reported; the leases lapse
        else:
            self.health = STOPPED
        self._record_status()
        if self._pool is not None:
            self._pool.close(wait=self.health != HALTED)
        connections[self.store.using].close()
        self._done.set()
