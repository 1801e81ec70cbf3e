"""When a worker group runs one more Pump, and when it lets one go.

A Pump makes one database round-trip at a time: while it claims or reports, its pool waits. Under a backlog of
short jobs the round-trips, not the handlers, then bound the group, and a second Pump (its own connection,
its own pool) nearly doubles the drain. So a group starts with ``PUMPS`` Pumps and grows, one at a time, up to
``MAX_PUMPS`` while every Pump it runs is *starved*: its claims keep coming back full (more work is waiting)
while at least half of what its pool may take at once sat free for them (the pool was waiting on the claim,
not busy with handlers). Jobs that keep the pool busy (slow handlers) never grow a group: their claims are
small. A group lets its newest extra Pump go once none of its Pumps has been starved for ``RETIRE_AFTER``.

:class:`Starvation` is what one Pump's Driver keeps; :func:`resize` is the decision, taken by the node over
every Pump of a group. Neither does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

#: Starved claims in a row before a Pump counts as starved (one full claim may be a coincidence).
STARVED_AFTER = 3
#: A group lets an extra Pump go once none of its Pumps has been starved for this long.
RETIRE_AFTER = timedelta(seconds=30)


@dataclass(slots=True)
class Starvation:
    """One Pump's claims, as the elastic rule sees them. ``wide`` is the most a claim of this Pump can ask
    for (the smaller of its pool and its batch)."""

    wide: int
    streak: int = 0  # starved claims in a row
    last_starved: datetime | None = None  # when the last starved claim landed; None: never

    def observe(self, asked: int, got: int, now: datetime) -> None:
        """A claim that asked for ``asked`` jobs landed with ``got`` (a failed claim is not observed)."""
        if got >= asked and asked * 2 >= self.wide:
            self.streak += 1
            self.last_starved = now
        else:
            self.streak = 0

    @property
    def starved(self) -> bool:
        return self.streak >= STARVED_AFTER


def resize(pumps: Sequence[Starvation], *, floor: int, ceiling: int, now: datetime) -> int:
    """+1 to start one more Pump, -1 to let the newest extra one go, 0 to keep the group as it is.

    ``pumps`` are the group's running Pumps (not those already letting go), ``floor`` its ``PUMPS`` and
    ``ceiling`` its ``MAX_PUMPS``."""
    count = len(pumps)
    if count < floor:
        return 0  # the node starts the floor itself; this rule only moves between floor and ceiling
    if count < ceiling and all(p.starved for p in pumps):
        return 1
    if count > floor and all(p.last_starved is None or now - p.last_starved >= RETIRE_AFTER for p in pumps):
        return -1
    return 0
