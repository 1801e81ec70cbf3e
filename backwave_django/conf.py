"""The one reader of ``settings.BACKWAVE``: typed, lazy, validated.

Nothing reads the setting at import time. :func:`get` parses it on first use and caches the result until
Django's ``setting_changed`` signal says otherwise. :func:`problems` lists every mistake in it for the system
checks (``backwave.E0xx``), each with a hint that says what to write instead.

Every key is described once, in :data:`TOP_LEVEL_KEYS`, :data:`GROUP_KEYS` and :data:`RETRY_KEYS`: its kind
(which also bounds it), its default, the check that reports it and why its range is what it is. The checks,
the parsing and ``docs/reference/settings.md`` all follow those tables. Every range is finite and chosen so
that every later use is safe: ``now + LEASE_DURATION`` and ``now + BACKOFF_CAP`` never overflow a datetime,
a pool is a reasonable number of threads, a batch a reasonable number of SQL parameters.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from .conf_kinds import (
    Channel,
    Count,
    Derived,
    Duration,
    Flag,
    Key,
    Number,
    OneOf,
    OptionalPath,
    OptionalToken,
    Queues,
    QueuesProblem,
    Shape,
    is_name,
    shown,
)
from .conf_schedules import (
    RetentionSettings,
    ScheduleSettings,
    parse_retention,
    parse_schedules,
    retention_problems,
    schedule_problems,
)
from .core.dispatch import Policy, Strict, Weighted
from .core.names import QUEUE_NAME_RULE
from .core.retry import MAX_ATTEMPTS_LIMIT, MAX_BACKOFF_BASE, MAX_BACKOFF_SECONDS, RetryPolicy

HOUR = 3600.0
DAY = 24 * HOUR
MiB = 1024 * 1024
#: ``backwave_pump --grace`` overrides SHUTDOWN_GRACE, so it shares its range.
SHUTDOWN_GRACE = Duration(low=0, high=DAY)
#: A group's queues; under POLICY 'weighted' each has a weight, a ratio: finer than 1:10000 is never seen.
QUEUES = Queues(weight=Count(low=1, high=10_000))
_RETRY = RetryPolicy()  # the Core's defaults are RETRY's defaults


#: The keys of one worker group, named like ``GroupSettings``' fields (POOL_SIZE is pool_size).
GROUP_KEYS: dict[str, Key] = {
    "QUEUES": Key(kind=QUEUES, default=["default"], check="backwave.E005"),
    "POLICY": Key(kind=OneOf(("strict", "weighted")), default="strict", check="backwave.E006"),
    "POOL_SIZE": Key(
        kind=Count(low=1, high=1000),
        default=20,
        check="backwave.E007",
        why="Each one is a worker thread of every Pump of the group.",
    ),
    "PUMPS": Key(
        kind=Count(low=1, high=64),
        default=1,
        check="backwave.E019",
        why="Each Pump has its own pool of threads and its own database connection.",
    ),
    "MAX_PUMPS": Key(
        kind=Count(low=1, high=64),
        default=Derived("max(PUMPS, 2)", lambda v: max(v["PUMPS"], 2)),
        check="backwave.E077",
        why="It must also be at least PUMPS (backwave.E078).",
    ),
    "POLL_INTERVAL": Key(
        kind=Duration(low=0.001, high=HOUR),
        default=1.0,
        check="backwave.E008",
        why="Shorter polls in a busy loop; wake-up hints usually find work sooner anyway.",
    ),
    "LEASE_DURATION": Key(
        kind=Duration(low=1, high=7 * DAY),
        default=60.0,
        check="backwave.E022",
        why="A crashed worker's jobs wait this long before they run again.",
    ),
    "HEARTBEAT_INTERVAL": Key(
        kind=Duration(low=0.001, high=7 * DAY),
        check="backwave.E023",
        default=Derived("LEASE_DURATION / 3", lambda v: v["LEASE_DURATION"] / 3),
        why="It must also be shorter than LEASE_DURATION (backwave.E009).",
    ),
    "MAX_CLAIM_BATCH": Key(
        kind=Count(low=1, high=1000),
        default=32,
        check="backwave.E020",
        why="A claim passes its job ids to the database as parameters.",
    ),
    "MAX_OUTCOME_BATCH": Key(
        kind=Count(low=1, high=1000),
        check="backwave.E021",
        default=Derived("MAX_CLAIM_BATCH", lambda v: v["MAX_CLAIM_BATCH"]),
        why="A batch of outcomes is written with a few parameters per job.",
    ),
    "MAINTENANCE_INTERVAL": Key(
        kind=Duration(low=0.01, high=HOUR),
        default=5.0,
        check="backwave.E024",
        why="Expired leases wait up to this long for the sweep that ends them.",
    ),
    "SHUTDOWN_GRACE": Key(
        kind=SHUTDOWN_GRACE,
        default=30.0,
        check="backwave.E025",
        why="0 releases running jobs at once on SIGTERM.",
    ),
    "TIMEOUT": Key(
        kind=Duration(low=0.001, high=7 * DAY, none_ok=True),
        default=1800.0,
        check="backwave.E026",
        why="An Attempt that runs longer is asked to stop, then failed.",
    ),
}

#: The keys of ``RETRY``; their defaults are :class:`RetryPolicy`'s, and their bounds the Core's.
RETRY_KEYS: dict[str, Key] = {
    "MAX_ATTEMPTS": Key(
        kind=Count(low=1, high=MAX_ATTEMPTS_LIMIT),
        default=_RETRY.max_attempts,
        check="backwave.E027",
        why="It is copied into each job, stored as a 32-bit integer.",
    ),
    "BACKOFF_BASE": Key(
        kind=Number(low=1, high=MAX_BACKOFF_BASE),
        default=_RETRY.backoff_base,
        check="backwave.E028",
        why="A plain number, not a duration: the waits grow as BASE ** n.",
    ),
    "BACKOFF_CAP": Key(
        kind=Duration(low=0, high=MAX_BACKOFF_SECONDS),
        default=_RETRY.backoff_cap,
        check="backwave.E029",
        why="Longer than 30 days is a schedule, not a retry.",
    ),
    "JITTER": Key(
        kind=Flag(),
        default=_RETRY.jitter,
        check="backwave.E030",
        why="True spreads retries of jobs that failed together over the whole wait.",
    ),
}

TOP_LEVEL_KEYS: dict[str, Key] = {
    "GROUPS": Key(
        kind=Shape("a dict of group name: group dict"),
        default={"default": {"QUEUES": ["default"]}},
        check="backwave.E003",
    ),
    "RETRY": Key(kind=Shape("a dict"), default={}, check="backwave.E010"),  # unknown keys: RETRY_UNKNOWN_KEY
    "MAX_PAYLOAD_BYTES": Key(
        kind=Count(low=1, high=16 * MiB),
        default=65536,
        check="backwave.E011",
        why="A payload is JSON stored in one row and read into memory whole.",
    ),
    "MAX_OUTPUT_BYTES": Key(
        kind=Count(low=1, high=16 * MiB),
        default=65536,
        check="backwave.E070",
        why="A return value is JSON stored with its job and read into memory whole.",
    ),
    "DATABASE": Key(kind=Shape("a database alias in DATABASES"), default="default", check="backwave.E012"),
    "HINTS": Key(kind=Flag(), default=True, check="backwave.E013"),
    "MANIFEST_PATH": Key(kind=OptionalPath(), default=None, check="backwave.E015"),
    "PREPARED_STATEMENTS": Key(
        kind=Flag(),
        default=True,
        check="backwave.E016",
        why="Write False behind a pooler that cannot keep prepared statements.",
    ),
    "SCHEDULES": Key(kind=Shape("a dict of schedule name: schedule dict"), default={}, check="backwave.E031"),
    "RETENTION": Key(kind=Shape("a dict (SUCCEEDED, FAILED, QUEUES)"), default={}, check="backwave.E044"),
    "HINT_CHANNEL": Key(
        kind=Channel(),
        default="backwave",
        check="backwave.E060",
        why="Projects that share a PostgreSQL server each need their own.",
    ),
    "LISTEN_DATABASE": Key(
        kind=Shape("None, or a PostgreSQL database alias in DATABASES"),
        default=None,
        check="backwave.E061",
    ),
    "DEBUG_SPANS": Key(
        kind=Flag(),
        default=False,
        check="backwave.E062",
        why="True also traces every claim, report and lease sweep: many spans, for debugging.",
    ),
    "HEALTH_TOKEN": Key(
        kind=OptionalToken(),
        default=None,
        check="backwave.E063",
        why="None leaves the health endpoint open to anyone who can reach it.",
    ),
}


#: A group's QUEUES: one check id per kind of problem (its shape for POLICY is the key's own check).
QUEUES_CHECKS: dict[QueuesProblem, str] = {
    "shape": GROUP_KEYS["QUEUES"].check,
    "name": "backwave.E050",
    "twice": "backwave.E051",
    "weight": "backwave.E052",
}
#: RETRY has a key that is not one of RETRY_KEYS (RETRY that is not a dict is the key's own check).
RETRY_UNKNOWN_KEY = "backwave.E053"


@dataclass(frozen=True, slots=True)
class Problem:
    id: str
    msg: str
    hint: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSettings:
    name: str
    queues: tuple[str, ...]
    weights: tuple[int, ...] | None  # None: the Strict policy
    pool_size: int
    pumps: int
    max_pumps: int  # under a backlog of short jobs the group grows from pumps up to this (core.elastic)
    poll_interval: timedelta
    lease_duration: timedelta
    heartbeat_interval: timedelta
    max_claim_batch: int
    max_outcome_batch: int
    maintenance_interval: timedelta
    shutdown_grace: timedelta
    timeout: timedelta | None  # None: no time limit

    def new_policy(self) -> Policy:
        """A fresh policy (Weighted keeps per-Pump credit, so each Driver needs its own)."""
        if self.weights is None:
            return Strict(self.queues)
        return Weighted(tuple(zip(self.queues, self.weights, strict=True)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    groups: dict[str, GroupSettings]
    retry: RetryPolicy
    max_payload_bytes: int
    max_output_bytes: int
    database: str
    hints: bool
    manifest_path: Path | None
    prepared_statements: bool
    schedules: dict[str, ScheduleSettings] = field(default_factory=dict)
    retention: RetentionSettings = field(default_factory=lambda: parse_retention({}))
    hint_channel: str = "backwave"  #: the PostgreSQL channel of wake-up hints
    listen_database: str | None = None  #: the alias the hint listener uses; None: ``database``
    debug_spans: bool = False
    health_token: str | None = None

    @property
    def listen_alias(self) -> str:
        """The database alias of the wake-up hint listener (LISTEN_DATABASE, else DATABASE)."""
        return self.listen_database or self.database

    def served_queues(self) -> set[str]:
        return {queue for group in self.groups.values() for queue in group.queues}


def _raw() -> Any:
    return getattr(django_settings, "BACKWAVE", {})


# --- checking -------------------------------------------------------------------------------------


def _unknown_key(key: Any, table: dict[str, Key], where: str, check: str) -> Problem:
    """The hint names the known key that ``key`` resembles, if one does."""
    close = difflib.get_close_matches(key, table, n=1) if isinstance(key, str) and len(key) <= 80 else []
    hint = (f"Did you mean {close[0]!r}? " if close else "") + f"Known keys: {', '.join(table)}."
    return Problem(check, f"{where} has an unknown key {shown(key)}.", hint)


def _unknown_keys(raw: dict[Any, Any], table: dict[str, Key], where: str, check: str) -> list[Problem]:
    return [_unknown_key(key, table, where, check) for key in raw if key not in table]


def _value_problems(raw: dict[Any, Any], table: dict[str, Key], where: str) -> list[Problem]:
    """A problem for each value in ``raw`` that its key's kind refuses (a Shape is checked apart)."""
    found = []
    for name, key in table.items():
        if name in raw and not key.kind.accepts(raw[name]):
            msg = f"{where}[{name!r}] is {shown(raw[name])}, not {key.kind.rule}."
            found.append(Problem(key.check, msg, key.hint(name)))
    return found


def _queue_problems(where: str, group: dict[Any, Any]) -> list[Problem]:
    policy, queues = group.get("POLICY", "strict"), group.get("QUEUES", GROUP_KEYS["QUEUES"].default)
    if not GROUP_KEYS["POLICY"].kind.accepts(policy):
        return []  # backwave.E006 says so; which shape QUEUES needs is unknown
    found = QUEUES.problem(queues, weighted=policy == "weighted")
    if found is None:
        return []
    kind, what, hint = found
    return [Problem(QUEUES_CHECKS[kind], f"{where}['QUEUES'] {what}", hint)]


def _heartbeat_problems(where: str, group: dict[Any, Any]) -> list[Problem]:
    lease_key, beat_key = GROUP_KEYS["LEASE_DURATION"], GROUP_KEYS["HEARTBEAT_INTERVAL"]
    lease, beat = group.get("LEASE_DURATION", lease_key.default), group.get("HEARTBEAT_INTERVAL")
    if beat is None or not (lease_key.kind.accepts(lease) and beat_key.kind.accepts(beat)):
        return []
    lease_s, beat_s = lease_key.kind.parse(lease).total_seconds(), beat_key.kind.parse(beat).total_seconds()
    if beat_s < lease_s:
        return []
    msg = f"{where}: HEARTBEAT_INTERVAL ({beat_s:g} s) is not shorter than LEASE_DURATION ({lease_s:g} s)."
    hint = "Heartbeats must renew a lease before it lapses: leave HEARTBEAT_INTERVAL out (LEASE_DURATION/3)."
    return [Problem("backwave.E009", msg, hint)]


def _max_pumps_problems(where: str, group: dict[Any, Any]) -> list[Problem]:
    pumps_key, most_key = GROUP_KEYS["PUMPS"], GROUP_KEYS["MAX_PUMPS"]
    pumps, most = group.get("PUMPS", pumps_key.default), group.get("MAX_PUMPS")
    if most is None or not (pumps_key.kind.accepts(pumps) and most_key.kind.accepts(most)) or most >= pumps:
        return []
    msg = f"{where}: MAX_PUMPS ({most}) is less than PUMPS ({pumps})."
    hint = "Set MAX_PUMPS to PUMPS for a fixed number of Pumps, or higher to let a backlog add Pumps."
    return [Problem("backwave.E078", msg, hint)]


def _group_problems(name: Any, group: Any) -> list[Problem]:
    where = f"BACKWAVE['GROUPS'][{shown(name)}]"
    found = []
    if not is_name(name):
        msg = f"BACKWAVE['GROUPS'] has a group named {shown(name)}, which is not a valid group name."
        hint = f"Name each group like a queue, with {QUEUE_NAME_RULE}, e.g. 'default' or 'batch'."
        found.append(Problem("backwave.E017", msg, hint))
    if not isinstance(group, dict):
        hint = "Write each group as a dict of settings, e.g. {'QUEUES': ['default']}."
        return [*found, Problem("backwave.E018", f"{where} is {shown(group)}, not a dict.", hint)]
    found += _unknown_keys(group, GROUP_KEYS, where, "backwave.E004")
    found += _queue_problems(where, group)
    found += _value_problems(group, GROUP_KEYS, where)
    return found + _heartbeat_problems(where, group) + _max_pumps_problems(where, group)


def _groups_problems(groups: Any) -> list[Problem]:
    if not isinstance(groups, dict) or not groups:
        msg = f"BACKWAVE['GROUPS'] is {shown(groups)}, not a non-empty dict."
        hint = "Write GROUPS as a dict of group name: group, e.g. {'default': {'QUEUES': ['default']}}."
        return [Problem(TOP_LEVEL_KEYS["GROUPS"].check, msg, hint)]
    return [problem for name, group in groups.items() for problem in _group_problems(name, group)]


def _retry_problems(retry: Any) -> list[Problem]:
    where, check = "BACKWAVE['RETRY']", TOP_LEVEL_KEYS["RETRY"].check
    if not isinstance(retry, dict):
        example = {name: key.default for name, key in RETRY_KEYS.items()}
        return [Problem(check, f"{where} is {shown(retry)}, not a dict.", f"Write RETRY as {example}.")]
    found = _unknown_keys(retry, RETRY_KEYS, where, RETRY_UNKNOWN_KEY)
    return found + _value_problems(retry, RETRY_KEYS, where)


def _database_problems(raw: dict[Any, Any]) -> list[Problem]:
    alias, aliases = raw.get("DATABASE", "default"), sorted(django_settings.DATABASES)
    if isinstance(alias, str) and alias in aliases:
        return []
    msg = f"BACKWAVE['DATABASE'] is {shown(alias)}, not an alias in DATABASES."
    hint = f"Write one of the aliases in DATABASES: {', '.join(map(repr, aliases))}."
    return [Problem(TOP_LEVEL_KEYS["DATABASE"].check, msg, hint)]


def _listen_database_problems(raw: dict[Any, Any]) -> list[Problem]:
    alias, aliases = raw.get("LISTEN_DATABASE"), sorted(django_settings.DATABASES)
    if alias is None or (isinstance(alias, str) and alias in aliases):
        return []
    msg = f"BACKWAVE['LISTEN_DATABASE'] is {shown(alias)}, not None or an alias in DATABASES."
    hint = (
        "Write None (hints are listened for on BACKWAVE['DATABASE']), or the alias of a direct connection "
        f"to the same PostgreSQL database, one of: {', '.join(map(repr, aliases))}."
    )
    return [Problem(TOP_LEVEL_KEYS["LISTEN_DATABASE"].check, msg, hint)]


def problems(raw: Any = None) -> list[Problem]:
    """Every mistake in ``settings.BACKWAVE`` (or ``raw``), as system-check material. Never raises."""
    raw = _raw() if raw is None else raw
    if not isinstance(raw, dict):
        return [Problem("backwave.E001", f"BACKWAVE is {shown(raw)}, not a dict.", "Set BACKWAVE to a dict.")]
    found = _unknown_keys(raw, TOP_LEVEL_KEYS, "BACKWAVE", "backwave.E002")
    found += _groups_problems(raw.get("GROUPS", TOP_LEVEL_KEYS["GROUPS"].default))
    found += _retry_problems(raw.get("RETRY", {}))
    found += _database_problems(raw) + _listen_database_problems(raw)
    nested = schedule_problems(raw.get("SCHEDULES", {})) + retention_problems(raw.get("RETENTION", {}))
    found += [Problem(*problem) for problem in nested]
    return found + _value_problems(raw, TOP_LEVEL_KEYS, "BACKWAVE")


# --- parsing (only ever of settings that have no problems) ----------------------------------------


def _values(raw: dict[str, Any], table: dict[str, Key]) -> dict[str, Any]:
    """Each key's parsed value, or its default; defaults derived from other keys come last."""
    values: dict[str, Any] = {}
    derived: dict[str, Derived] = {}
    for name, key in table.items():
        value = raw.get(name, key.default)
        if isinstance(value, Derived):
            derived[name] = value
        else:
            values[name] = key.kind.parse(value)
    for name, rule in derived.items():
        values[name] = rule.compute(values)
    return values


def _group(name: str, raw: dict[str, Any]) -> GroupSettings:
    values = _values(raw, GROUP_KEYS)
    queues, weighted = values.pop("QUEUES"), values.pop("POLICY") == "weighted"
    return GroupSettings(
        name=name,
        queues=tuple(queues),
        weights=tuple(queues.values()) if weighted else None,
        **{key.lower(): value for key, value in values.items()},
    )


def default_group_settings(name: str = "default") -> GroupSettings:
    """A group with every default (it serves the queue ``default``), to build others from with
    ``dataclasses.replace``."""
    return _group(name, {})


def _retry_policy(raw: dict[str, Any]) -> RetryPolicy:
    values = _values(raw, RETRY_KEYS)
    return RetryPolicy(
        max_attempts=values["MAX_ATTEMPTS"],
        backoff_base=values["BACKOFF_BASE"],
        backoff_cap=values["BACKOFF_CAP"].total_seconds(),
        jitter=values["JITTER"],
    )


def _settings(raw: dict[str, Any]) -> Settings:
    values = _values(raw, TOP_LEVEL_KEYS)
    return Settings(
        groups={name: _group(name, group) for name, group in values["GROUPS"].items()},
        retry=_retry_policy(values["RETRY"]),
        max_payload_bytes=values["MAX_PAYLOAD_BYTES"],
        max_output_bytes=values["MAX_OUTPUT_BYTES"],
        database=values["DATABASE"],
        hints=values["HINTS"],
        manifest_path=values["MANIFEST_PATH"],
        prepared_statements=values["PREPARED_STATEMENTS"],
        schedules=parse_schedules(values["SCHEDULES"]),
        retention=parse_retention(values["RETENTION"]),
        hint_channel=values["HINT_CHANNEL"],
        listen_database=values["LISTEN_DATABASE"],
        debug_spans=values["DEBUG_SPANS"],
        health_token=values["HEALTH_TOKEN"],
    )


_cache: Settings | None = None


def parse(raw: Any) -> Settings:
    """Settings from a ``BACKWAVE``-shaped dict, checked like the setting itself: for tools that run worker
    groups with settings of their own (the benchmark) without touching ``settings.BACKWAVE``."""
    found = problems(raw)
    if found:
        listing = "\n".join(f"{p.id}: {p.msg} {p.hint}" for p in found)
        raise ImproperlyConfigured(f"BACKWAVE settings are invalid:\n{listing}")
    return _settings(raw)


def get() -> Settings:
    """The parsed settings. Raises ImproperlyConfigured, listing every problem, when they are wrong."""
    global _cache
    if _cache is None:
        _cache = parse(_raw())
    return _cache


def reload() -> None:
    """Forget the parsed settings, so the next :func:`get` reads ``settings.BACKWAVE`` again."""
    global _cache
    _cache = None


def _reset(*, setting: str, **_: Any) -> None:
    if setting in ("BACKWAVE", "DATABASES"):
        reload()


setting_changed.connect(_reset)
