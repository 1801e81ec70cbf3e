"""The event loop a Pump runs its ``async def`` handlers on: one per Pump, in a thread of its own.

It starts with the first async Attempt the Pump launches, so a Pump that runs only ordinary handlers never has
one. Async Attempts take no worker thread: the Node Driver counts them against POOL_SIZE like every other
Attempt, so the pool bound covers both kinds together. One loop per Pump, not per group or per process, so
that a handler that blocks its loop (a synchronous call inside ``async def``) stalls only its own Pump's async
work, and each Pump's loop ends with it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger("backwave.pump")


class AttemptLoop:
    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run ``coroutine`` as a task on the loop (started if need be); the future cancels the task."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._running())

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=self._run, args=(loop,), name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def close(self, timeout: float = 1.0) -> bool:
        """Cancel what still runs, stop the loop and wait up to ``timeout`` s for its thread. Returns whether
        the loop ended (a handler blocking it in synchronous code keeps it from ending)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return True
        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError):
            logger.warning("%s: async handlers did not end when cancelled", self.name)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        return not thread.is_alive()


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks, timeout=0.5) if tasks else None
