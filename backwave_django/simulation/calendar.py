"""The schedules and retention a scenario draws, written as a project writes them in the settings.

A scenario's schedules are entries of ``BACKWAVE['SCHEDULES']``, its retention is ``BACKWAVE['RETENTION']``,
as plain values; the simulator checks them and reads them with the product's own settings code
(``conf_schedules``), so what runs is what a project would get. The cadences are seconds, not hours (a run
lasts minutes of virtual time): fixed intervals, six-field cron expressions (seconds last), a five-field one,
and one that ticks only in the local hour that daylight saving time removes or repeats; in UTC and in zones
with and without daylight saving time. A run may begin a few seconds before a daylight saving change, so the
change falls inside its workload.

Nodes learn the schedules from their settings when they start, as ``shell.node.Node.start`` does: a
schedule may enter the settings late (a deploy adds it) or leave them (a deploy removes it), and a node that
starts after that syncs the settings it then has.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..conf_schedules import (
    ScheduleSettings,
    parse_retention,
    parse_schedules,
    retention_problems,
    schedule_problems,
)
from ..core.retention import RetentionRule
from ..store.contract import ScheduleDefinition
from .timeline import START

__all__ = [
    "ROUTABLE",
    "START",
    "ScheduleSpec",
    "definitions",
    "draw_retention",
    "draw_schedules",
    "draw_start",
]

ROUTABLE = "sim.job"

#: When a run may begin: the ordinary START, or just before a daylight saving change of these zones (2026).
DST_CHANGES = {
    "Europe/Paris": (datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC)),
    "America/New_York": (datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC)),
}
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata")
CRONS = (
    "* * * * * */5",  # every 5 s
    "* * * * * */7",  # seconds 0, 7, ..., 56: a short gap at each minute
    "* * * * * 0,15,30,45",
    "* * * * * 10-13",  # four ticks a second apart, once a minute
    "* * * * *",  # five fields: once a minute
    "* 2 * * * */10",  # only in local hour 2: the hour a spring change skips and an autumn one repeats
)
EVERY = (2, 3, 5, 8, 13, 20)
_SOON = timedelta(minutes=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSpec:
    """One schedule of the scenario: its settings entry, and how its runs behave."""

    name: str
    settings: dict[str, Any]  # its entry in BACKWAVE['SCHEDULES']
    max_attempts: int
    duration: float  # how long a run's handler takes when nothing goes wrong
    since: float = 0.0  # nodes that start this many seconds into the run or later have it in their settings
    until: float | None = None  # ... and no longer from then on (a deploy removed it)

    def in_settings(self, at: float) -> bool:
        return self.since <= at and (self.until is None or at < self.until)


def draw_start(rng: random.Random) -> datetime:
    """An ordinary start, or a start 5 to 40 s before a daylight saving change."""
    if rng.random() < 0.4:
        return START
    zone = rng.choice(sorted(DST_CHANGES))
    change = rng.choice(DST_CHANGES[zone])
    return change - timedelta(milliseconds=rng.randint(5_000, 40_000))


def draw_schedules(
    rng: random.Random, queues: tuple[str, ...], workload: float, start: datetime
) -> tuple[ScheduleSpec, ...]:
    """None in two seeds of five; else one to three schedules, some added or removed by a deploy."""
    if rng.random() < 0.4:
        return ()
    changing = [z for z, changes in DST_CHANGES.items() if any(start < c <= start + _SOON for c in changes)]
    specs = []
    for index in range(rng.randint(1, 3)):
        entry: dict[str, Any] = {"JOB": ROUTABLE, "QUEUE": rng.choice(queues)}
        if rng.random() < 0.5:
            entry["EVERY"] = rng.choice(EVERY)
        else:
            entry["CRON"] = rng.choice(CRONS)
        zone = changing[0] if changing and rng.random() < 0.7 else rng.choice(ZONES)
        if zone != "UTC" or rng.random() < 0.5:
            entry["TIMEZONE"] = zone
        if rng.random() < 0.5:
            entry["MISFIRE"] = "coalesce"
        if rng.random() < 0.4:
            entry["NO_OVERLAP"] = True
        since = round(rng.uniform(5.0, workload * 0.7), 3) if rng.random() < 0.2 else 0.0
        until = round(rng.uniform(since + 5.0, workload), 3) if rng.random() < 0.15 else None
        specs.append(
            ScheduleSpec(
                name=f"s{index}",
                settings=entry,
                max_attempts=rng.randint(1, 3),
                duration=round(10 ** rng.uniform(-1.7, 1.0), 3),  # 20 ms to 10 s: some outlast a tick
                since=since,
                until=until,
            )
        )
    return tuple(specs)


def draw_retention(rng: random.Random, queues: tuple[str, ...]) -> dict[str, Any] | None:
    """None (nothing purged, as before retention existed) in half the seeds; else short retention (seconds),
    with an override for some queues."""
    if rng.random() < 0.5:
        return None
    keep = (1, 2, 5, 20)
    keep_failed = (None, 1, 10, 60)
    raw: dict[str, Any] = {"SUCCEEDED": rng.choice(keep), "FAILED": rng.choice(keep_failed)}
    overrides = {q: {"SUCCEEDED": rng.choice((None, *keep))} for q in queues if rng.random() < 0.3}
    if overrides:
        raw["QUEUES"] = overrides
    return raw


def definitions(schedules: tuple[ScheduleSpec, ...], at: float) -> list[ScheduleDefinition]:
    """What a node starting ``at`` seconds into the run stores from its settings (``schedules.definitions``
    without the registry: the sim's one job takes no arguments; its payload names the schedule)."""
    specs = [s for s in schedules if s.in_settings(at)]
    raw = {s.name: s.settings for s in specs}
    problems = schedule_problems(raw)
    if problems:
        raise ValueError(f"the scenario drew settings the product refuses: {problems}")
    parsed = parse_schedules(raw)
    return [_definition(parsed[spec.name], spec.max_attempts) for spec in specs]


def _definition(settings: ScheduleSettings, max_attempts: int) -> ScheduleDefinition:
    return ScheduleDefinition(
        name=settings.name, wire_name=ROUTABLE, queue=settings.queue or "default", payload=settings.name,
        cron=settings.cron, every=settings.every, timezone=settings.timezone, misfire=settings.misfire,
        no_overlap=settings.no_overlap, max_attempts=max_attempts, timeout=None,
    )  # fmt: skip


def retention_rules(raw: dict[str, Any] | None, queues: tuple[str, ...]) -> tuple[RetentionRule, ...]:
    """A group's retention, as ``conf`` gives it to each Pump (none when the scenario has none)."""
    if raw is None:
        return ()
    problems = retention_problems(raw)
    if problems:
        raise ValueError(f"the scenario drew settings the product refuses: {problems}")
    return parse_retention(raw).rules(queues)


def misfire_grace(floor: float, maintenance: float) -> timedelta:
    """``shell.pump.misfire_grace`` with the scenario's floor instead of a minute (a miss would otherwise
    need a minute-long outage of every node)."""
    return max(timedelta(seconds=floor), timedelta(seconds=2 * maintenance))
