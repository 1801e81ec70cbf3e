"""Deadlines the Node Driver keeps: a handler's timeout, the end of its grace, the shutdown grace.

A min-heap of (time, kind, job id, attempt); entries are never removed early, only skipped when they come due
and no longer apply (the job finished meanwhile), so adding and firing are both O(log n). The Driver asks
the Shell to wake it at the earliest time (``WakeAt``) and fires whatever is due on every event it sees.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from dataclasses import dataclass, field
from datetime import datetime


class Kind(enum.IntEnum):
    TIMEOUT = 1  # a handler's time limit: ask it to stop
    ABANDON = 2  # a timed-out handler's grace is over: fail the Attempt without it
    GRACE = 3  # the shutdown grace is over: ask every handler to stop
    CUT_OFF = 4  # handlers had their chance to stop: give their jobs back without them
    GIVE_UP = 5  # outcomes that could not be written during shutdown are dropped (their leases lapse)


@dataclass(frozen=True, slots=True, order=True)
class Deadline:
    at: datetime
    seq: int
    kind: Kind = field(compare=False)
    job_id: int = field(compare=False, default=0)
    attempt: int = field(compare=False, default=0)


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[Deadline] = []
        self._seq = itertools.count()

    def add(self, at: datetime, kind: Kind, job_id: int = 0, attempt: int = 0) -> None:
        heapq.heappush(self._heap, Deadline(at, next(self._seq), kind, job_id, attempt))

    def any_due(self, now: datetime) -> bool:
        return bool(self._heap) and self._heap[0].at <= now

    def due(self, now: datetime) -> list[Deadline]:
        """Every deadline at or before ``now``, earliest first, removed from the heap."""
        fired = []
        while self._heap and self._heap[0].at <= now:
            fired.append(heapq.heappop(self._heap))
        return fired

    @property
    def earliest(self) -> datetime | None:
        return self._heap[0].at if self._heap else None
