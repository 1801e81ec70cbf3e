"""Virtual time: a heap of actions, each run at its instant, in the order they were scheduled for ties.

Time is an integer number of microseconds since the run began, so arithmetic is exact and a replay is
identical to the last bit. Nodes read it through their own clock (:meth:`Timeline.wall`), which adds their
skew; nothing in the simulator reads a real clock or sleeps.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

US = 1_000_000
#: The wall-clock instant at which a run begins, unless its scenario says otherwise.
START = datetime(2026, 1, 1, tzinfo=UTC)


def us(seconds: float) -> int:
    """Seconds as whole microseconds."""
    return round(seconds * US)


def between(later: datetime, earlier: datetime) -> int:
    """``later - earlier`` in microseconds."""
    return (later - earlier) // timedelta(microseconds=1)


class Timeline:
    def __init__(self, start: datetime = START) -> None:
        self.start = start
        self.now = 0
        self.actions = 0  # actions run so far
        self._heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._last = (0, start)  # the last instant read, as a datetime
        self._seq = 0

    def at(self, when: int, action: Callable[..., None], *args: Any) -> None:
        """Run ``action(*args)`` at ``when`` (never in the past)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, action, args))

    def after(self, delay: int, action: Callable[..., None], *args: Any) -> None:
        self.at(self.now + delay, action, *args)

    def run_next(self) -> bool:
        """Run the earliest action; False when none is left."""
        if not self._heap:
            return False
        when, _, action, args = heapq.heappop(self._heap)
        self.now = when
        self.actions += 1
        action(*args)
        return True

    def wall(self, skew: int = 0, at: int | None = None) -> datetime:
        """The wall clock of a node whose clock is ``skew`` microseconds ahead, now (or ``at``)."""
        instant = (self.now if at is None else at) + skew
        if instant != self._last[0]:  # a step reads the clock many times at one instant: build it once
            self._last = (instant, self.start + timedelta(microseconds=instant))
        return self._last[1]
