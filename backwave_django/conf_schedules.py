"""``BACKWAVE['SCHEDULES']`` and ``BACKWAVE['RETENTION']``: their keys, their checks, their parsing.

Checks that need the job registry (is JOB registered, do KWARGS fit it) live in :mod:`backwave_django.checks`;
everything about the shape of the settings is here, read by :mod:`backwave_django.conf`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .conf_kinds import Duration, Flag, Key, OneOf, Shape, is_name, shown
from .core.names import QUEUE_NAME_RULE, queue_name_problem
from .core.retention import RetentionRule
from .core.schedules import MAX_EVERY, MIN_EVERY, Misfire, cron_problem, zone_problem

DAY = 86400.0
#: How long a finished job may be kept at most (ten years), so that ``now - keep`` never underflows.
KEEP = Duration(low=1, high=3650 * DAY, none_ok=True)

SCHEDULE_KEYS: dict[str, Key] = {
    "JOB": Key(kind=Shape("the wire name of a registered job"), default=None, check="backwave.E032"),
    "CRON": Key(kind=Shape("a cron expression of 5 or 6 fields"), default=None, check="backwave.E033"),
    "EVERY": Key(
        kind=Duration(low=MIN_EVERY.total_seconds(), high=MAX_EVERY.total_seconds()),
        default=None,
        check="backwave.E034",
        why="A fixed interval, counted from when the schedule first appeared; CRON follows the calendar.",
    ),
    "TIMEZONE": Key(kind=Shape("an IANA time zone name"), default="UTC", check="backwave.E035"),
    "KWARGS": Key(kind=Shape("a dict of the job's arguments"), default={}, check="backwave.E036"),
    "MISFIRE": Key(
        kind=OneOf(tuple(m.value for m in Misfire)),
        default=Misfire.SKIP.value,
        check="backwave.E037",
        why="'skip' records missed ticks and runs none of them; 'coalesce' runs one for them all.",
    ),
    "NO_OVERLAP": Key(
        kind=Flag(), default=False, check="backwave.E038", why="True skips a tick while the last run is live."
    ),
    "QUEUE": Key(kind=Shape("a queue name, or None for the job's own"), default=None, check="backwave.E039"),
}

RETENTION_KEYS: dict[str, Key] = {
    "SUCCEEDED": Key(
        kind=KEEP,
        default=DAY,
        check="backwave.E042",
        why="Succeeded and cancelled jobs are deleted this long after they finished; None keeps them.",
    ),
    "FAILED": Key(
        kind=KEEP,
        default=14 * DAY,
        check="backwave.E043",
        why="Dead-lettered and quarantined jobs are deleted this long after they finished; None keeps them.",
    ),
    "QUEUES": Key(kind=Shape("a dict of queue name: {SUCCEEDED, FAILED}"), default={}, check="backwave.E044"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleSettings:
    name: str
    job: str
    cron: str
    every: timedelta | None
    timezone: str
    kwargs: dict[str, Any]
    misfire: Misfire
    no_overlap: bool
    queue: str | None  # None: the job's own queue


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionSettings:
    succeeded: timedelta | None
    failed: timedelta | None
    queues: dict[str, tuple[timedelta | None, timedelta | None]]  # queue: (succeeded, failed)

    def rules(self, queues: tuple[str, ...]) -> tuple[RetentionRule, ...]:
        """The retention of ``queues`` (a group's), one rule per distinct pair of durations."""
        by_keep: dict[tuple[timedelta | None, timedelta | None], list[str]] = {}
        for queue in queues:
            keep = self.queues.get(queue, (self.succeeded, self.failed))
            by_keep.setdefault(keep, []).append(queue)
        return tuple(
            RetentionRule(queues=tuple(names), succeeded=keep[0], failed=keep[1])
            for keep, names in by_keep.items()
        )


# --- checking ---------------------------------------------------------------------------------------


def _problem(check: str, msg: str, hint: str) -> tuple[str, str, str]:
    return (check, msg, hint)


def schedule_problems(schedules: Any) -> list[tuple[str, str, str]]:
    """Every mistake in SCHEDULES, as (check id, message, hint)."""
    if not isinstance(schedules, dict):
        hint = "Write SCHEDULES as {'nightly-report': {'JOB': 'reports.nightly', 'CRON': '0 3 * * *'}}."
        return [_problem("backwave.E031", f"BACKWAVE['SCHEDULES'] is {shown(schedules)}, not a dict.", hint)]
    found = []
    for name, entry in schedules.items():
        where = f"BACKWAVE['SCHEDULES'][{shown(name)}]"
        if not is_name(name):
            hint = f"Name each schedule with {QUEUE_NAME_RULE}, e.g. 'nightly-report'."
            found.append(
                _problem("backwave.E031", f"{where}: {shown(name)} is not a valid schedule name.", hint)
            )
        if not isinstance(entry, dict):
            hint = "Write each schedule as a dict, e.g. {'JOB': 'reports.nightly', 'CRON': '0 3 * * *'}."
            found.append(_problem("backwave.E031", f"{where} is {shown(entry)}, not a dict.", hint))
            continue
        found += _entry_problems(where, entry)
    return found


def _entry_problems(where: str, entry: dict[Any, Any]) -> list[tuple[str, str, str]]:
    found = [
        _problem(
            "backwave.E040",
            f"{where} has an unknown key {shown(key)}.",
            f"Known keys: {', '.join(SCHEDULE_KEYS)}.",
        )
        for key in entry
        if key not in SCHEDULE_KEYS
    ]
    if not isinstance(entry.get("JOB"), str) or not entry.get("JOB"):
        found.append(
            _problem(
                "backwave.E032",
                f"{where}['JOB'] is {shown(entry.get('JOB'))}.",
                "Name the wire name of a registered job, e.g. 'reports.nightly'.",
            )
        )
    has_cron, has_every = entry.get("CRON") is not None, entry.get("EVERY") is not None
    if has_cron == has_every:
        which = "both CRON and EVERY" if has_cron else "neither CRON nor EVERY"
        hint = (
            "Give exactly one: CRON ('0 3 * * *', or 6 fields with seconds last) or EVERY (seconds or a "
            "timedelta)."
        )
        found.append(_problem("backwave.E041", f"{where} has {which}.", hint))
    if has_cron and (problem := cron_problem(entry["CRON"])):
        found.append(
            _problem(
                "backwave.E033",
                f"{where}['CRON']: {problem}.",
                "Write 'minute hour day month weekday', e.g. '0 3 * * *', or add seconds as a sixth field.",
            )
        )
    for name in ("EVERY", "MISFIRE", "NO_OVERLAP"):
        key = SCHEDULE_KEYS[name]
        if name in entry and entry[name] is not None and not key.kind.accepts(entry[name]):
            found.append(
                _problem(
                    key.check,
                    f"{where}[{name!r}] is {shown(entry[name])}, not {key.kind.rule}.",
                    key.hint(name),
                )
            )
    if "TIMEZONE" in entry and (problem := zone_problem(entry["TIMEZONE"])):
        found.append(
            _problem(
                "backwave.E035",
                f"{where}['TIMEZONE']: {problem}.",
                "Write an IANA name, e.g. 'UTC' (the default) or 'Europe/Paris'.",
            )
        )
    if not isinstance(entry.get("KWARGS", {}), dict):
        found.append(
            _problem(
                "backwave.E036",
                f"{where}['KWARGS'] is {shown(entry['KWARGS'])}, not a dict.",
                "Write the job's arguments by name, e.g. {'report_id': 7}.",
            )
        )
    queue = entry.get("QUEUE")
    if queue is not None and (
        problem := queue_name_problem(queue) if isinstance(queue, str) else "not a str"
    ):
        found.append(
            _problem(
                "backwave.E039",
                f"{where}['QUEUE']: {problem}.",
                f"Name a queue with {QUEUE_NAME_RULE}, or leave QUEUE out to use the job's.",
            )
        )
    return found


def retention_problems(retention: Any) -> list[tuple[str, str, str]]:
    where = "BACKWAVE['RETENTION']"
    if not isinstance(retention, dict):
        return [
            _problem(
                "backwave.E044",
                f"{where} is {shown(retention)}, not a dict.",
                "Write RETENTION as {'SUCCEEDED': 86400, 'FAILED': 1209600}.",
            )
        ]
    found = [
        _problem(
            "backwave.E044",
            f"{where} has an unknown key {shown(key)}.",
            f"Known keys: {', '.join(RETENTION_KEYS)}.",
        )
        for key in retention
        if key not in RETENTION_KEYS
    ]
    found += _keep_problems(where, retention)
    queues = retention.get("QUEUES", {})
    if not isinstance(queues, dict):
        return [
            *found,
            _problem(
                "backwave.E044",
                f"{where}['QUEUES'] is {shown(queues)}, not a dict.",
                "Write {'reports': {'SUCCEEDED': None}} to keep a queue's finished jobs for ever.",
            ),
        ]
    for queue, entry in queues.items():
        inner = f"{where}['QUEUES'][{shown(queue)}]"
        if not is_name(queue):
            found.append(
                _problem(
                    "backwave.E044",
                    f"{inner}: not a valid queue name.",
                    f"Name queues with {QUEUE_NAME_RULE}.",
                )
            )
        if not isinstance(entry, dict) or set(entry) - {"SUCCEEDED", "FAILED"}:
            found.append(
                _problem(
                    "backwave.E044",
                    f"{inner} is {shown(entry)}.",
                    "Write a dict with SUCCEEDED and/or FAILED.",
                )
            )
            continue
        found += _keep_problems(inner, entry)
    return found


def _keep_problems(where: str, entry: dict[Any, Any]) -> list[tuple[str, str, str]]:
    found = []
    for name in ("SUCCEEDED", "FAILED"):
        key = RETENTION_KEYS[name]
        if name in entry and not key.kind.accepts(entry[name]):
            found.append(
                _problem(
                    key.check,
                    f"{where}[{name!r}] is {shown(entry[name])}, not {key.kind.rule}.",
                    key.hint(name),
                )
            )
    return found


# --- parsing (only ever of settings that have no problems) ----------------------------------------


def parse_schedules(raw: dict[str, Any]) -> dict[str, ScheduleSettings]:
    every_kind = SCHEDULE_KEYS["EVERY"].kind
    return {
        name: ScheduleSettings(
            name=name,
            job=entry["JOB"],
            cron=entry.get("CRON") or "",
            every=every_kind.parse(entry["EVERY"]) if entry.get("EVERY") is not None else None,
            timezone=entry.get("TIMEZONE", "UTC"),
            kwargs=dict(entry.get("KWARGS", {})),
            misfire=Misfire(entry.get("MISFIRE", Misfire.SKIP.value)),
            no_overlap=bool(entry.get("NO_OVERLAP", False)),
            queue=entry.get("QUEUE"),
        )
        for name, entry in raw.items()
    }


def parse_retention(raw: dict[str, Any]) -> RetentionSettings:
    def keep(entry: dict[str, Any], name: str, default: Any) -> timedelta | None:
        value: timedelta | None = KEEP.parse(entry.get(name, default))
        return value

    succeeded = keep(raw, "SUCCEEDED", RETENTION_KEYS["SUCCEEDED"].default)
    failed = keep(raw, "FAILED", RETENTION_KEYS["FAILED"].default)
    queues = {
        queue: (keep(entry, "SUCCEEDED", succeeded), keep(entry, "FAILED", failed))
        for queue, entry in raw.get("QUEUES", {}).items()
    }
    return RetentionSettings(succeeded=succeeded, failed=failed, queues=queues)
