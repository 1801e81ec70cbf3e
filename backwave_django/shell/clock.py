"""The clocks the Shell reads: the wall clock for the ``now`` carried by events, a monotonic one for its own
deadlines (a wall clock that jumps must not stall a timer). Tests inject :class:`FakeClock`, which moves only
when told to, both clocks together."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Protocol

from django.conf import settings


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """``django.utils.timezone.now()``, with ``USE_TZ`` read once (the Pump reads the clock several times for
    every job, and each reading of a setting goes through Django's lazy settings object)."""

    def __init__(self) -> None:
        self._zone: tzinfo | None = UTC if settings.USE_TZ else None

    def now(self) -> datetime:
        return datetime.now(self._zone)

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
