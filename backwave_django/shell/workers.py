"""The worker pool: POOL_SIZE threads started once, each taking the next Attempt from one shared queue.

Lighter than a ThreadPoolExecutor on the hot path: handing over a job is one queue put, with no Future and
no per-submit thread bookkeeping. A task's own exception is the task's business (the Pump's ``_attempt``
never raises); a pool thread only ever stops when the pool is closed.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("backwave.pump")
_CLOSE = object()


class WorkerPool:
    def __init__(self, size: int, name: str) -> None:
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True) for n in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._tasks.put((fn, args))

    def _work(self) -> None:
        while (task := self._tasks.get()) is not _CLOSE:
            fn, args = task
            try:
                fn(*args)
            except Exception:  # pragma: no cover - tasks handle their own errors
                logger.exception("a worker task raised")

    def close(self, wait: bool = True) -> None:
        """Let queued tasks finish, then stop every thread (waiting for them unless ``wait`` is False)."""
        for _ in self._threads:
            self._tasks.put(_CLOSE)
        if wait:
            for thread in self._threads:
                thread.join()
