"""Cut-off alarms: one thread that cuts a handler off when the Driver said, whatever the loop is doing.

The Driver gives up on a handler that outlives its time limit (and the grace) when its deadline fires on the
Pump's loop. The loop can be held up meanwhile by a store call of its own, and on SQLite the handler itself
may be the cause: a transaction it holds open keeps the database's write lock, so the Pump's next write
(a heartbeat, say) waits for it, and no deadline fires. So when a job with a time limit starts, the Pump
also arms an alarm for the ``cut_off_at`` the Driver put on its ``ExecuteJob``; if the Attempt is still
running then, the alarm revokes its database guard (the store cuts its sessions off, which on SQLite rolls
its transaction back and hands the write lock back), and the loop, free again, ends the Attempt as the
Driver decides. Revoking is idempotent: the loop's own cut-off, later, finds it done.

The thread starts with the first alarm and sleeps until the earliest one. An Attempt that ends disarms its
alarm, so an alarm holds nothing of an ended Attempt for long (the heap is swept when disarmed ones pile up).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from ..core.text import describe

logger = logging.getLogger("backwave.pump")

#: Disarmed alarms are swept out of the heap once they outnumber the armed ones by this many.
SWEEP_AFTER = 1024


class Alarms:
    def __init__(self, name: str, monotonic: Callable[[], float]) -> None:
        self.name = name
        self.monotonic = monotonic
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, Callable[[], None]] = {}
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, at: float, action: Callable[[], None]) -> int:
        """Run ``action`` on the alarm thread at monotonic time ``at``; returns the key that disarms it."""
        key = next(self._keys)
        with self._wake:
            if self._closed:
                return key
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (at, key))
            self._armed[key] = action
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"{self.name}-alarms", daemon=True)
                self._thread.start()
            elif earliest is None or at < earliest:
                self._wake.notify()
        return key

    def disarm(self, key: int) -> None:
        with self._wake:
            if (
                self._armed.pop(key, None) is not None
                and len(self._heap) > 2 * len(self._armed) + SWEEP_AFTER
            ):
                self._heap = [entry for entry in self._heap if entry[1] in self._armed]
                heapq.heapify(self._heap)

    def __len__(self) -> int:
        """Alarms armed and not yet run or disarmed."""
        with self._wake:
            return len(self._armed)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._heap.clear()
            self._armed.clear()
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _next_due(self) -> Callable[[], None] | None:
        """Wait for the earliest armed alarm to come due and take it; None once closed."""
        with self._wake:
            while not self._closed:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)  # disarmed
                if self._heap and self._heap[0][0] <= self.monotonic():
                    return self._armed.pop(heapq.heappop(self._heap)[1])
                self._wake.wait(self._heap[0][0] - self.monotonic() if self._heap else None)
            return None

    def _run(self) -> None:
        while (action := self._next_due()) is not None:
            try:
                action()
            except Exception as exc:  # an alarm never takes the thread down: the loop's cut-off still comes
                logger.error("%s: a cut-off alarm failed: %s", self.name, describe(exc), exc_info=exc)
