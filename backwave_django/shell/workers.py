"""The worker pool: POOL_SIZE threads started once, sharing one queue of Attempts to run.

Handing over a job costs a deque append under a lock. Idle threads are woken one at a time, in a chain: a
submit wakes one sleeper if none is already on its way, and a thread that takes a task while more are
queued wakes the next. A burst of quick jobs is then run by the few threads that are awake instead of
waking the whole pool (each wake-up is a system call and a fight for the GIL), while a burst of slow jobs
still reaches every thread within a few hops.

A thread whose handler was abandoned (it ignored its timeout, or the shutdown) is stuck until the handler
returns, if ever. :meth:`abandoned` starts a replacement so the pool keeps its size, up to
``max_replacements`` at a time; when a stuck thread's task finally ends, the thread retires if it was
replaced. A task's own errors are the task's business (the Pump's tasks never raise).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("backwave.pump")
_CLOSE = object()


class WorkerPool:
    def __init__(
        self,
        size: int,
        name: str,
        *,
        max_replacements: int | None = None,
        on_change: Callable[[int, int], None] | None = None,
    ) -> None:
        self.name = name
        self.on_change = on_change  # called with (stuck, unreplaced) whenever they change
        self.max_replacements = size if max_replacements is None else max_replacements
        self._lock = threading.Lock()
        self._tasks: deque[Any] = deque()
        self._sleepers = threading.Semaphore(0)
        self._idle = 0  # threads that have decided to sleep (or are asleep)
        self._waking = 0  # wake-ups sent and not yet taken by a sleeper
        self._stuck = 0  # threads running an abandoned task
        self._replaced = 0  # replacement threads started for stuck ones and not yet retired
        self._started = 0
        self._threads: list[threading.Thread] = []
        for _ in range(size):
            self._spawn()

    def _spawn(self) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        self._started += 1
        thread = threading.Thread(target=self._work, name=f"{self.name}-{self._started}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def submit(self, fn: Callable[[], bool], /) -> None:
        """Run ``fn`` in a pool thread. It returns True when its Attempt had been abandoned meanwhile."""
        self._push(fn)

    def _push(self, task: Any) -> None:
        with self._lock:
            self._tasks.append(task)
            wake = self._wake_one()
        if wake:
            self._sleepers.release()

    def _wake_one(self) -> bool:
        """Under the lock: claim a sleeper to wake, unless none sleeps or one is already on its way."""
        if self._idle > self._waking and not self._waking:
            self._waking += 1
            return True
        return False

    def abandoned(self) -> tuple[int, int]:
        """A running task was abandoned: replace its thread if the cap allows. Returns (stuck, unreplaced)."""
        with self._lock:
            self._stuck += 1
            if self._replaced < self.max_replacements:
                self._replaced += 1
                self._spawn()
            counts = self._stuck, self._stuck - self._replaced
        if self.on_change is not None:
            self.on_change(*counts)
        return counts

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self._stuck, self._stuck - self._replaced

    def _work(self) -> None:
        while True:
            with self._lock:
                task = self._tasks.popleft() if self._tasks else None
                wake = bool(self._tasks) and self._wake_one()  # more queued: get the next thread going
                if task is None:
                    self._idle += 1
            if wake:
                self._sleepers.release()
            if task is None:
                self._sleepers.acquire()
                with self._lock:
                    self._idle -= 1
                    self._waking -= 1
                continue
            if task is _CLOSE:
                return
            try:
                was_abandoned = task()
            except Exception:  # pragma: no cover - tasks handle their own errors
                logger.exception("a worker task raised")
                was_abandoned = False
            if was_abandoned and self._retire():
                return

    def _retire(self) -> bool:
        """An abandoned task ended: this thread is no longer stuck; it leaves if a replacement took over."""
        with self._lock:
            self._stuck -= 1
            retire = self._replaced > 0
            if retire:
                self._replaced -= 1
            counts = self._stuck, self._stuck - self._replaced
        if self.on_change is not None:
            self.on_change(*counts)
        return retire

    def close(self, wait: bool = True, timeout: float | None = None) -> list[threading.Thread]:
        """Let queued tasks finish, then stop every thread; returns the threads still running after waiting
        (stuck in an abandoned handler) when ``wait`` is True."""
        with self._lock:
            threads = list(self._threads)
            self._tasks.extend(_CLOSE for _ in threads)
            asleep = self._idle - self._waking  # wake every sleeper at once, not one after another
            self._waking += asleep
        if asleep > 0:
            self._sleepers.release(asleep)
        if wait:
            deadline = None if timeout is None else time.monotonic() + timeout
            for thread in threads:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return [t for t in threads if t.is_alive()]
