"""Deadlines the Node Driver keeps: a handler's timeout, the end of its grace, the shutdown grace, the end of
an outcome's linger.

A min-heap of (time, sequence, kind, job id, attempt) tuples, so adding and firing are both O(log n), and
the heap compares them in C (a frozen dataclass with ``order=True`` compared in Python: the Pump spent more
on those comparisons than on the rest of its deadlines). The Driver asks the
Shell to wake it at the earliest time (``WakeAt``) and fires whatever is due on every event it sees.

An Attempt that ends takes its deadlines with it (:meth:`Deadlines.end`). They are marked void, not dug out
of the heap; a void entry at the top is dropped at once, so ``earliest`` and ``pop_due`` never see one, and
the heap is rebuilt without them once they are half of it. Without that, a pump that runs a thousand jobs a
second under the default 30-minute time limit would hold 1.8 million dead entries.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from datetime import datetime
from typing import NamedTuple

#: The void entries a heap may hold beyond half its size before it is rebuilt without them.
COMPACT_SLACK = 64


class Kind(enum.IntEnum):
    TIMEOUT = 1  # a handler's time limit: ask it to stop
    ABANDON = 2  # a timed-out handler's grace is over: fail the Attempt without it
    GRACE = 3  # the shutdown grace is over: ask every handler to stop
    CUT_OFF = 4  # handlers had their chance to stop: give their jobs back without them
    GIVE_UP = 5  # outcomes that could not be written during shutdown are dropped (their leases lapse)
    FLUSH = 6  # outcomes that waited REPORT_LINGER for the pool's other handlers are written


#: The kinds that belong to one Attempt, and end with it.
PER_ATTEMPT = frozenset({Kind.TIMEOUT, Kind.ABANDON})


class Deadline(NamedTuple):
    """Ordered by time, then by when it was added (``seq`` is unique, so ``kind`` is never compared)."""

    at: datetime
    seq: int
    kind: Kind
    job_id: int = 0
    attempt: int = 0


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[Deadline] = []
        self._seq = itertools.count()
        self._held: dict[tuple[int, int], int] = {}  # (job id, attempt) -> its entries in the heap
        self._void: set[tuple[int, int]] = set()  # Attempts that ended with entries still in the heap

    def add(self, at: datetime, kind: Kind, job_id: int = 0, attempt: int = 0) -> None:
        heapq.heappush(self._heap, Deadline(at, next(self._seq), kind, job_id, attempt))
        if kind in PER_ATTEMPT:
            key = (job_id, attempt)
            self._held[key] = self._held.get(key, 0) + 1

    def end(self, job_id: int, attempt: int) -> None:
        """The Attempt ended: its deadlines no longer apply, and none of them will come due."""
        key = (job_id, attempt)
        if key not in self._held:
            return
        self._void.add(key)
        if 2 * len(self._void) > len(self._heap) + COMPACT_SLACK:
            self._compact()
        else:
            self._drop_void_top()

    def any_due(self, now: datetime) -> bool:
        return bool(self._heap) and self._heap[0].at <= now

    def pop_due(self, now: datetime) -> Deadline | None:
        """The earliest deadline at or before ``now``, removed from the heap; None if none is due.

        One at a time, so that what firing one deadline ends (an Attempt, or all of them at a cut-off) is
        void before the next is handed out."""
        if not self.any_due(now):
            return None
        deadline = self._pop()
        self._drop_void_top()
        return deadline

    @property
    def earliest(self) -> datetime | None:
        return self._heap[0].at if self._heap else None

    def attempts(self) -> set[tuple[int, int]]:
        """The (job id, attempt) of every Attempt whose deadlines still apply."""
        return set(self._held) - self._void

    def __len__(self) -> int:
        """Entries in the heap, void ones included (what it costs in memory)."""
        return len(self._heap)

    def _pop(self) -> Deadline:
        deadline = heapq.heappop(self._heap)
        if deadline.kind in PER_ATTEMPT:
            key = (deadline.job_id, deadline.attempt)
            left = self._held[key] - 1
            if left:
                self._held[key] = left
            else:
                del self._held[key]
                self._void.discard(key)
        return deadline

    def _is_void(self, deadline: Deadline) -> bool:
        return deadline.kind in PER_ATTEMPT and (deadline.job_id, deadline.attempt) in self._void

    def _drop_void_top(self) -> None:
        while self._heap and self._is_void(self._heap[0]):
            self._pop()

    def _compact(self) -> None:
        self._heap = [d for d in self._heap if not self._is_void(d)]
        heapq.heapify(self._heap)
        for key in self._void:
            del self._held[key]
        self._void.clear()
