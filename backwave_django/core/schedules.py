"""Recurring schedules: when a schedule ticks, and what becomes of each tick (minted or skipped).

A cadence is a cron expression in an IANA time zone, or a fixed interval (``every``). Cron expressions are
parsed and iterated by croniter (5 fields, or 6 with seconds as the last field); the time zone rules are ours,
applied to the wall-clock times croniter produces:

- a wall-clock time that does not exist (a spring-forward gap) fires once, at the first valid instant
  after it;
- a wall-clock time that exists twice (a fall-back hour) fires once, at its first occurrence;
- so each tick is an instant, strictly increasing, and never minted twice.

A fixed interval ignores zones: ticks are ``cursor + n * every``.

:func:`plan` decides, from where a schedule's cursor stands and ``now``, which ticks to mint and which to
skip. A tick is *fresh* while it is less than ``grace`` old, else *missed* (its workers, or the database, were
down). ``skip`` (the default) mints fresh ticks and records missed ones as skipped; ``coalesce`` mints exactly
one make-up run for all the missed ticks, however many, then carries on. A pass walks at most ``limit`` ticks,
so a longer backlog takes several passes; each tick is fresh or missed by the clock alone, and the make-up run
is minted by the pass whose walk reaches the end of the missed ticks, so where the passes stop changes
nothing. ``no_overlap`` skips every tick
while the schedule's previous run is not finished, and mints at most one. The cursor moves to the last tick
considered, so every tick is decided once; the store moves it by compare-and-set, so across a cluster each
tick is minted at most once.

The planner reads whether a run is live a moment before the store mints, and a run can become live in
between (an operator's "run now", or a requeue of the previous run). So the store asks again under the
schedule's lock, which every path that makes a run of a schedule live takes, and mints what
:func:`confirmed` keeps of the decision.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .values import value

#: At most this many ticks are walked per schedule per pass; a longer backlog is worked off over passes.
MAX_TICKS_PER_PASS = 10_000
#: A schedule keeps the times of this many of its most recent skipped ticks (its count keeps them all).
MAX_RECORDED_SKIPS = 32
#: The shortest and longest fixed interval.
MIN_EVERY = timedelta(seconds=1)
MAX_EVERY = timedelta(days=366)


class Misfire(enum.StrEnum):
    SKIP = "skip"  # missed ticks are skipped (and counted)
    COALESCE = "coalesce"  # all missed ticks together make one run


def zone_problem(name: object) -> str | None:
    """Why ``name`` is not an IANA time zone this machine knows, or None."""
    if not isinstance(name, str) or not name or len(name) > 64:
        return "a time zone is an IANA name such as 'UTC' or 'Europe/Paris'"
    try:
        _zone(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not an IANA time zone known on this machine (the tzdata package has them all)"
    return None


def cron_problem(expression: object) -> str | None:
    """Why ``expression`` is not a cron expression we accept, or None."""
    if not isinstance(expression, str):
        return "a cron expression is a str such as '0 3 * * *'"
    fields = expression.split()
    if len(fields) not in (5, 6):
        return (
            f"{expression!r} has {len(fields)} fields; write 5 (minute hour day month weekday) or 6 (the "
            "same, then seconds)"
        )
    if not croniter.is_valid(expression):
        return f"{expression!r} is not a valid cron expression"
    try:
        Cadence(cron=expression).next_after(datetime(2000, 1, 1, tzinfo=UTC))
    except Exception:  # croniter gives up on a date that never comes (February 30th, say)
        return f"{expression!r} never fires"
    return None


@lru_cache(maxsize=256)
def _zone(name: str) -> tzinfo:
    return UTC if name == "UTC" else ZoneInfo(name)


#: The first tick after an instant, by (expression, zone, instant): a pure function's memo (like lru_cache),
#: shared by every walker. Dict reads and writes are atomic, so threads may share it.
_NEXT_TICK: dict[tuple[str, tzinfo, datetime], datetime] = {}
_NEXT_TICK_SIZE = 8192


#: At most this many ticks a day for a day's ticks to be kept (see :func:`_daily_times`).
MAX_DAILY_TICKS = 1440
_A_DAY = date(2000, 1, 3)


@lru_cache(maxsize=256)
def _daily_times(expression: str) -> tuple[time, ...] | None:
    """The wall-clock times of day at which ``expression`` ticks, when they are the same every day (the day
    of the month, the month and the weekday are all ``*``) and there are at most MAX_DAILY_TICKS of them;
    else None. croniter walks the one day; every later step is a lookup in it, which is exact, because such
    an expression's wall-clock ticks repeat from day to day."""
    if expression.split()[2:5] != ["*", "*", "*"]:
        return None
    walker = croniter(expression, datetime.combine(_A_DAY, time()) - timedelta(seconds=1))
    times: list[time] = []
    while (wall := walker.get_next(datetime)).date() == _A_DAY:
        if len(times) == MAX_DAILY_TICKS:
            return None
        times.append(wall.time())
    return tuple(times)


def _next_in_day(times: tuple[time, ...], wall: datetime) -> datetime:
    """The first wall-clock time strictly after ``wall`` of an expression that ticks at ``times`` each day."""
    index = bisect_right(times, wall.time())
    if index < len(times):
        return datetime.combine(wall.date(), times[index])
    return datetime.combine(wall.date() + timedelta(days=1), times[0])


class Walkers:
    """Parsed cron expressions, kept by whoever walks them often (a Driver, a test pump): parsing and
    stepping cost far more than a lookup. Not shared between threads: each Driver has its own."""

    def __init__(self) -> None:
        self._parsed: dict[str, croniter] = {}
        self._at: dict[str, datetime] = {}  # the wall time each walker last stepped to

    def next_tick(self, expression: str, zone: tzinfo, after: datetime) -> datetime:
        """The first tick strictly after ``after`` (see the module's rules for gaps and repeated hours)."""
        key = (expression, zone, after)  # zones are cached instances (_zone), so they hash cheaply
        tick = _NEXT_TICK.get(key)
        if tick is None:
            tick = self._step(expression, zone, after)
            if len(_NEXT_TICK) >= _NEXT_TICK_SIZE:
                _NEXT_TICK.clear()
            _NEXT_TICK[key] = tick
        return tick

    def _step(self, expression: str, zone: tzinfo, after: datetime) -> datetime:
        wall = after.astimezone(zone).replace(tzinfo=None)
        while True:
            wall = self._next_wall(expression, wall)
            tick = _instant(wall, zone)
            if tick > after:  # not a wall time seen again (a repeated hour), nor mapped to the same instant
                return tick

    def _next_wall(self, expression: str, wall: datetime) -> datetime:
        """The first wall-clock time strictly after ``wall`` at which ``expression`` ticks, by croniter."""
        times = _daily_times(expression)
        if times is not None:
            return _next_in_day(times, wall)
        walker = self._parsed.get(expression)
        if walker is None:
            walker = self._parsed[expression] = croniter(expression, wall)
        elif self._at.get(expression) != wall:  # a walk goes on from its last tick: no reset needed
            walker.set_current(wall, force=True)
        self._at[expression] = stepped = walker.get_next(datetime)
        return stepped


@value
class Cadence:
    """When a schedule ticks: ``cron`` in ``timezone``, or every ``every``."""

    cron: str = ""
    every: timedelta | None = None
    timezone: str = "UTC"

    def window(
        self,
        after: datetime,
        until: datetime,
        grace: timedelta,
        limit: int = MAX_TICKS_PER_PASS,
        walkers: Walkers | None = None,
    ) -> Window:
        """The ticks strictly after ``after`` and at most ``until`` (up to ``limit`` of them), sorted into
        fresh ones (at most ``grace`` old at ``until``) and missed ones."""
        if self.every is not None:
            return _every_window(after, until, self.every, grace, limit)
        walk = _cron_walk(self.cron, _zone(self.timezone), after, walkers)
        return _cron_window(walk, until, grace, limit)

    def next_after(self, when: datetime, walkers: Walkers | None = None) -> datetime:
        """The first tick strictly after ``when``."""
        if self.every is not None:
            return when + self.every
        return next(_cron_walk(self.cron, _zone(self.timezone), when, walkers))


@value
class Window:
    """The ticks of a span: how many, the last (the new cursor), every fresh one, the newest missed ones."""

    count: int
    last: datetime | None
    fresh: tuple[datetime, ...]
    missed: tuple[datetime, ...]  # the most recent missed ticks, oldest first, at most MAX_RECORDED_SKIPS
    more_missed: bool  # ``limit`` stopped the walk and the next tick is missed too: the backlog goes on


EMPTY = Window(count=0, last=None, fresh=(), missed=(), more_missed=False)


def _every_window(after: datetime, until: datetime, every: timedelta, grace: timedelta, limit: int) -> Window:
    due = max(0, (until - after) // every)
    count = min(due, limit)
    if count == 0:
        return EMPTY
    last = after + every * count
    more_missed = due > count and until - (last + every) > grace
    ticks = [last - every * k for k in range(min(count, MAX_RECORDED_SKIPS + grace // every + 1) - 1, -1, -1)]
    fresh = tuple(t for t in ticks if until - t <= grace)
    missed = tuple(t for t in ticks if until - t > grace)[-MAX_RECORDED_SKIPS:]
    return Window(count=count, last=last, fresh=fresh, missed=missed, more_missed=more_missed)


def _cron_window(walk: Iterator[datetime], until: datetime, grace: timedelta, limit: int) -> Window:
    count, last, more_missed = 0, None, False
    fresh: list[datetime] = []
    missed: deque[datetime] = deque(maxlen=MAX_RECORDED_SKIPS)
    while (tick := next(walk)) <= until:  # the walk never ends: a cadence ticks for ever
        if count == limit:
            more_missed = until - tick > grace
            break
        count, last = count + 1, tick
        (fresh if until - tick <= grace else missed).append(tick)
    return Window(count=count, last=last, fresh=tuple(fresh), missed=tuple(missed), more_missed=more_missed)


def _cron_walk(
    expression: str, zone: tzinfo, after: datetime, walkers: Walkers | None = None
) -> Iterator[datetime]:
    """Ticks strictly after ``after``, as instants in UTC, strictly increasing."""
    walkers = walkers or Walkers()
    tick = after
    while True:
        tick = walkers.next_tick(expression, zone, tick)
        yield tick


def _instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant of a wall-clock time: its first occurrence, or the end of the gap it falls in."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # No such wall time: it is in a gap. The gap ends where the offset changes, between these two readings.
    low, high = wall.replace(tzinfo=zone, fold=1).astimezone(UTC), first
    target = high.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == target:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


@value
class ScheduleState:
    """What :func:`plan` needs to know of a schedule."""

    name: str
    cadence: Cadence
    misfire: Misfire
    no_overlap: bool
    cursor: datetime
    paused: bool
    has_live_instance: bool


@value
class MintDecision:
    """Move a schedule's cursor from ``expected_cursor`` to ``new_cursor`` (only if it still stands there),
    mint one job per tick in ``ticks``, and record ``skipped_count`` skipped ticks (the newest in
    ``skipped``)."""

    schedule: str
    expected_cursor: datetime
    new_cursor: datetime
    ticks: tuple[datetime, ...]
    skipped: tuple[datetime, ...]
    skipped_count: int


def plan(
    state: ScheduleState,
    now: datetime,
    grace: timedelta,
    limit: int = MAX_TICKS_PER_PASS,
    walkers: Walkers | None = None,
) -> MintDecision | None:
    """What to do with the ticks of ``state`` that are due at ``now``; None when none are."""
    window = state.cadence.window(state.cursor, now, grace, limit, walkers)
    if window.last is None:
        return None
    if state.paused:
        mint: tuple[datetime, ...] = ()
    elif state.misfire is Misfire.COALESCE and window.missed and not window.more_missed:
        # One make-up run stands for every missed tick, minted when the walk has reached the last of them
        # (earlier passes of a long backlog skip theirs).
        mint = (window.missed[-1], *window.fresh)
    else:
        mint = window.fresh
    if state.no_overlap:
        mint = () if state.has_live_instance else mint[-1:]
    skipped = tuple(t for t in (*window.missed, *window.fresh) if t not in mint)[-MAX_RECORDED_SKIPS:]
    return MintDecision(
        schedule=state.name,
        expected_cursor=state.cursor,
        new_cursor=window.last,
        ticks=mint,
        skipped=skipped,
        skipped_count=window.count - len(mint),
    )


def confirmed(
    decision: MintDecision, *, no_overlap: bool, has_live_instance: Callable[[], bool]
) -> MintDecision:
    """What a store mints of ``decision``, asked under the schedule's lock: for a ``no_overlap`` schedule with
    a run live by then (``has_live_instance``, asked only when the answer matters), no run, and its ticks
    skipped and counted like every tick that comes while a run is live; the cursor moves all the same."""
    if not (no_overlap and decision.ticks) or not has_live_instance():
        return decision
    skipped = tuple(sorted((*decision.skipped, *decision.ticks)))[-MAX_RECORDED_SKIPS:]
    count = decision.skipped_count + len(decision.ticks)
    return replace(decision, ticks=(), skipped=skipped, skipped_count=count)
