"""The Pump: one thread, one event queue, one Node Driver, one pool of worker threads, one worker id.

The loop takes one event at a time, asks the Driver what to do, and obeys through the shared
:class:`~backwave_django.shell.runner.CommandRunner`: store calls run one at a time on this thread's own
connection; handlers run in the pool and report back by putting an event on the queue. Timers are deadlines
the loop checks itself (poll, heartbeat, maintenance, and the one time the Driver asked to be woken at), read
from the injected clock, so no ticker thread can die silently and a test can drive a real Pump on a fake
clock with :meth:`Pump.turn`. Polls pass through one gate that coalesces ticks and hints into a single
pending poll. When the queue runs empty the Driver hears ``Idle``. None of this decides anything: every
decision is the Driver's.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from .. import wakeups
from ..conf import GroupSettings
from ..core import events as ev
from ..core.driver import STOP_WINDOW, DriverConfig, NodeDriver
from ..core.health import Health
from ..core.retention import RetentionRule
from ..core.retry import RetryPolicy
from ..core.text import describe
from ..registry import Registry
from ..store.contract import JobStore
from .alarms import Alarms
from .clock import Clock, SystemClock
from .executor import DEFAULT_MAX_OUTPUT_BYTES, Attempt, Executor
from .loop import AttemptLoop
from .runner import CommandRunner
from .scope import run_attempt, run_attempt_async
from .workers import WorkerPool

logger = logging.getLogger("backwave.pump")


def misfire_grace(maintenance_interval: timedelta) -> timedelta:
    """A schedule tick this late is missed: a minute, or two maintenance intervals when they are longer (a
    tick is minted up to one interval late in the ordinary course)."""
    return max(timedelta(minutes=1), maintenance_interval * 2)


def new_worker_id(group: str) -> str:
    """Unique per Pump instance, so a restarted process never reuses one: host:pid:group:suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{group}:{uuid.uuid4().hex[:8]}"


class _Marker:
    """A timer or hint, turned into an event with ``now`` when the loop dequeues it."""

    def __init__(self, name: str, build: Callable[[datetime], ev.Event]) -> None:
        self.name, self.build = name, build

    def __repr__(self) -> str:
        return f"<{self.name}>"


POLL = _Marker("poll", lambda now: ev.PollDue(now=now))
IDLE = _Marker("idle", lambda now: ev.Idle(now=now))
HEARTBEAT = _Marker("heartbeat", lambda now: ev.HeartbeatDue(now=now))
MAINTENANCE = _Marker("maintenance", lambda now: ev.MaintenanceDue(now=now))
TIMER = _Marker("timer", lambda now: ev.TimerFired(now=now))


class Pump:
    """One claim -> execute -> report loop for a worker group."""

    def __init__(
        self,
        group: GroupSettings,
        *,
        store: JobStore,
        registry: Registry,
        retry: RetryPolicy,
        index: int = 0,
        hints: bool = True,
        clock: Clock | None = None,
        threads: bool = True,
        retention: tuple[RetentionRule, ...] = (),
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        self.group = group
        self.index = index
        self.store = store
        self.clock = clock or SystemClock()
        self.hints = hints
        self.threads = threads  # False: handlers run on the loop thread (deterministic tests)
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
                timeout=group.timeout,
                retention=retention,
                misfire_grace=misfire_grace(group.maintenance_interval),
            )
        )
        self.executor = Executor(
            registry,
            self.worker_id,
            self.clock.now,
            run_attempt,
            async_runner=run_attempt_async,
            max_output_bytes=max_output_bytes,
        )
        self._loop = AttemptLoop(f"backwave-{group.name}-{index}-async")
        self.started_at = self.clock.now()
        self.runner = CommandRunner(
            store=store,
            worker_id=self.worker_id,
            group=group.name,
            queues=group.queues,
            started_at=self.started_at,
            executor=self.executor,
            host=self,
            clock=self.clock.now,
        )
        self.stuck_threads = 0  # abandoned handler threads still running when the pump finished
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._gate = threading.Lock()
        self._poll_pending = False
        self._since_idle = False  # an event was handled since the last Idle
        self._pool: WorkerPool | None = None
        self._alarms = Alarms(f"backwave-{group.name}-{index}", self.clock.monotonic)
        self._hint_token: int | None = None
        self._ending: Health | None = None  # STOPPED or HALTED: the loop ends
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"backwave-pump-{group.name}-{index}", daemon=True
        )
        start = self.clock.monotonic()
        self._periods = {
            POLL: group.poll_interval.total_seconds(),
            HEARTBEAT: group.heartbeat_interval.total_seconds(),
            MAINTENANCE: group.maintenance_interval.total_seconds(),
        }
        self._deadlines: dict[_Marker, float] = {POLL: start, HEARTBEAT: start + self._periods[HEARTBEAT]}
        self._deadlines[MAINTENANCE] = start

    # -- lifecycle (called from other threads) ------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread and the pool. A deterministic test calls :meth:`open`, then :meth:`turn`."""
        self.open()
        self._thread.start()

    def open(self) -> None:
        if self.threads:
            self._pool = WorkerPool(
                self.group.pool_size,
                f"backwave-{self.group.name}-{self.index}",
                on_change=self._threads_changed,
            )
        if self.hints:
            self._hint_token = wakeups.subscribe(self.group.queues, self.request_poll)
        self.runner.record_status(Health.RUNNING, "")

    def request_poll(self) -> None:
        """The poll gate: at most one poll pending (a burst of hints collapses into one)."""
        with self._gate:
            if self._poll_pending:
                return
            self._poll_pending = True
        self._events.put(POLL)

    def shutdown(self, grace: timedelta) -> None:
        """Stop claiming and drain: running handlers may finish for ``grace``, then are stopped. Handlers
        still running when the Driver's stop window closes are cut off then by the alarm, even if the loop is
        held up (by a handler's transaction on SQLite) and has not seen the request yet."""
        self._events.put(ev.ShutdownRequested(now=self.clock.now(), grace=grace))
        if self.threads:  # without threads every handler runs on the loop: nothing to cut off beside it
            cut_off_in = max(grace, timedelta(0)) + STOP_WINDOW
            self._alarms.arm(self.clock.monotonic() + cut_off_in.total_seconds(), self._cut_off_all)

    def join(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def alive(self) -> bool:
        return not self._done.is_set()

    @property
    def busy(self) -> bool:
        """Something is running, buffered, being reported, or being claimed."""
        return not self.driver.idle or self.executor.busy

    @property
    def processed(self) -> int:
        """Outcomes written that applied."""
        return self.runner.applied

    # -- the loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._ending is None:
                self.turn(block=True)
        except Exception as exc:  # a bug in the loop or the Driver: halt this pump loudly, never the process
            logger.critical("%s: halted by a bug: %s", self.worker_id, describe(exc), exc_info=exc)
            self.runner.record_status(Health.HALTED, describe(exc))
            self._ending = Health.HALTED
        finally:
            self.close()

    def turn(self, *, block: bool = False) -> bool:
        """One pass of the loop: fire the timers that are due, then handle one event, waiting for it until
        the next timer when ``block``. Returns whether an event was handled."""
        self._fire_timers()
        if self._since_idle and self._events.empty():
            self._since_idle = False
            self._events.put(IDLE)
        try:
            if block:
                wait = max(0.0, min(self._deadlines.values()) - self.clock.monotonic())
                item = self._events.get(timeout=wait)
            else:
                item = self._events.get_nowait()
        except queue.Empty:
            return False
        self._handle(item)
        return True

    def _fire_timers(self) -> None:
        current = self.clock.monotonic()
        for marker, deadline in list(self._deadlines.items()):
            if current < deadline:
                continue
            if marker is TIMER:
                del self._deadlines[TIMER]
                self._events.put(TIMER)
                continue
            self._deadlines[marker] = current + self._periods[marker]
            if marker is POLL:
                self.request_poll()
            else:
                self._events.put(marker)

    def _handle(self, item: Any) -> None:
        if item is not IDLE:
            self._since_idle = True
        if isinstance(item, _Marker):
            if item is POLL:
                with self._gate:
                    self._poll_pending = False  # a hint arriving from now on re-arms the next poll
            event = item.build(self.clock.now())
        else:
            event = item
        for produced in self.runner.run(self.driver.step(event)):
            self._events.put(produced)

    # -- what the runner asks of its host ---------------------------------------------------------------

    def launch(self, attempt: Attempt) -> None:
        if self._pool is None:
            self._task(attempt, None)
            return
        alarm = None
        if attempt.cut_off_at is not None:
            at = self.clock.monotonic() + (attempt.cut_off_at - self.clock.now()).total_seconds()
            alarm = self._alarms.arm(at, lambda: self._cut_off(attempt))
        if attempt.registration.is_async:
            attempt.task = self._loop.submit(self._async_task(attempt, alarm))
        else:
            self._pool.submit(lambda: self._task(attempt, alarm))

    def _task(self, attempt: Attempt, alarm: int | None) -> bool:
        event = self.executor.run(attempt)
        if alarm is not None:
            self._alarms.disarm(alarm)
        if event is not None:
            self._events.put(event)
        return attempt.abandoned

    async def _async_task(self, attempt: Attempt, alarm: int | None) -> None:
        event = await self.executor.run_async(attempt)
        if alarm is not None:
            self._alarms.disarm(alarm)
        if event is not None:
            self._events.put(event)

    def _cut_off(self, attempt: Attempt) -> None:
        """On the alarm thread, at the Driver's cut-off time: an Attempt still running loses the database now,
        even if the loop is held up (by this very handler's transaction, on SQLite)."""
        if not self.executor.in_flight(attempt):
            return
        try:
            attempt.guard.revoke(self.store.cut_off_sessions)
        finally:
            if self.store.using in connections.settings:  # a database store may have used this thread's
                connections[self.store.using].close()

    def _cut_off_all(self) -> None:
        """On the alarm thread, when the shutdown's stop window closes: every Attempt still running."""
        for attempt in self.executor.running():
            self._cut_off(attempt)

    def wake_at(self, at: datetime) -> None:
        self._deadlines[TIMER] = self.clock.monotonic() + (at - self.clock.now()).total_seconds()

    def abandoned(self, attempt: Attempt) -> None:
        logger.error(
            "%s: gave up on job %s (%s) attempt %d; its handler is cut off from the database",
            self.worker_id, attempt.job.id, attempt.job.wire_name, attempt.job.attempt,
        )  # fmt: skip
        if self._pool is not None and not attempt.registration.is_async:  # an async one holds no thread
            self._pool.abandoned()

    def _threads_changed(self, stuck: int, unreplaced: int) -> None:
        self._events.put(ev.ThreadsAbandoned(now=self.clock.now(), running=stuck, unreplaced=unreplaced))

    def halt(self, reason: str) -> None:
        self._ending = Health.HALTED

    def stop(self) -> None:
        self._ending = Health.STOPPED

    @property
    def health(self) -> Health:
        """As last recorded; the Driver decides it."""
        return self.runner.health

    # -- the end -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """After the loop: unsubscribe, stop the pool, close this thread's connection."""
        if self._hint_token is not None:
            wakeups.unsubscribe(self._hint_token)
        if self._ending is Health.HALTED:
            for attempt in self.executor.running():
                attempt.stop()  # its result will not be reported; the leases lapse
        if self._pool is not None:
            stuck = self._pool.close(wait=self._ending is not Health.HALTED, timeout=1.0)
            self.stuck_threads = len(stuck)
        if not self._loop.close():
            self.stuck_threads += 1
        self._alarms.close()
        if self.store.using in connections.settings:  # a database store: this thread's connection
            connections[self.store.using].close()
        self._done.set()
