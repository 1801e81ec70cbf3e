"""The worker pool: POOL_SIZE threads started once, sharing one queue of Attempts to run.

Handing over a job costs a deque append under a lock. Idle threads are woken one at a time, in a chain: a
submit wakes one sleeper if none is already on its way, and a thread that takes a task while more are
queued wakes the next. A burst of quick jobs is then run by the few threads that are awake instead of
waking the whole pool (each wake-up is a system call and a fight for the GIL), while a burst of slow jobs
still reaches every thread within a few hops. A task's own errors are the task's business (the Pump's
``_attempt`` never raises); a pool thread stops only when the pool is closed.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("backwave.pump")
_CLOSE = object()


class WorkerPool:
    def __init__(self, size: int, name: str) -> None:
        self._lock = threading.Lock()
        self._tasks: deque[Any] = deque()
        self._sleepers = threading.Semaphore(0)
        self._idle = 0  # threads that have decided to sleep (or are asleep)
        self._waking = 0  # wake-ups sent and not yet taken by a sleeper
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True) for n in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._push((fn, args))

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
            fn, args = task
            try:
                fn(*args)
            except Exception:  # pragma: no cover - tasks handle their own errors
                logger.exception("a worker task raised")

    def close(self, wait: bool = True) -> None:
        """Let queued tasks finish, then stop every thread (waiting for them unless ``wait`` is False)."""
        for _ in self._threads:
            self._push(_CLOSE)
        if wait:
            for thread in self._threads:
                thread.join()
