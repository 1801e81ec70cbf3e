"""The clocks the Shell reads: the wall clock for the ``now`` carried by events, a monotonic one for its own
deadlines (a wall clock that jumps must not stall a timer). Tests inject :class:`FakeClock`, which moves only
when told to, both clocks together."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Protocol

from django.utils import timezone


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    def now(self) -> datetime:
        return timezone.now()

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock for tests: ``now()`` and ``monotonic()`` move only through :meth:`advance`."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._monotonic = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, by: timedelta | float) -> None:
        seconds = by.total_seconds() if isinstance(by, timedelta) else float(by)
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds
