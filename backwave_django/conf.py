"""The one reader of ``settings.BACKWAVE``: typed, lazy, validated.

Nothing reads the setting at import time. :func:`get` parses it on first use and caches the result until
Django's ``setting_changed`` signal says otherwise. :func:`problems` lists every mistake in it for the system
checks (``backwave.E0xx``), each with a hint that says what to write instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from .core.dispatch import Policy, Strict, Weighted
from .core.retry import RetryPolicy
from .store.contract import MAX_QUEUE_NAME_LENGTH

TOP_LEVEL_KEYS = {
    "GROUPS",
    "RETRY",
    "MAX_PAYLOAD_BYTES",
    "DATABASE",
    "HINTS",
    "MANIFEST_PATH",
    "PREPARED_STATEMENTS",
}
GROUP_KEYS = {
    "QUEUES",
    "POLICY",
    "POOL_SIZE",
    "PUMPS",
    "POLL_INTERVAL",
    "LEASE_DURATION",
    "HEARTBEAT_INTERVAL",
    "MAX_CLAIM_BATCH",
    "MAX_OUTCOME_BATCH",
    "MAINTENANCE_INTERVAL",
    "SHUTDOWN_GRACE",
}
RETRY_KEYS = {"MAX_ATTEMPTS", "BACKOFF_BASE", "BACKOFF_CAP"}
DEFAULT_GROUP = {"QUEUES": ["default"]}
#: Counts: the key, the smallest allowed value, the default.
GROUP_INTEGERS = {"POOL_SIZE": (1, 20), "PUMPS": (1, 1), "MAX_CLAIM_BATCH": (1, 32)}
#: Durations in seconds (a number or a timedelta): the key, whether zero is allowed, the default.
GROUP_DURATIONS = {
    "POLL_INTERVAL": (False, 1.0),
    "LEASE_DURATION": (False, 60.0),
    "MAINTENANCE_INTERVAL": (False, 5.0),
    "SHUTDOWN_GRACE": (True, 30.0),
}


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
    poll_interval: timedelta
    lease_duration: timedelta
    heartbeat_interval: timedelta
    max_claim_batch: int
    max_outcome_batch: int
    maintenance_interval: timedelta
    shutdown_grace: timedelta
    timeout: timedelta | None = timedelta(minutes=30)

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
    database: str
    hints: bool
    manifest_path: Path | None
    prepared_statements: bool

    def served_queues(self) -> set[str]:
        return {queue for group in self.groups.values() for queue in group.queues}


def _raw() -> Any:
    return getattr(django_settings, "BACKWAVE", {})


def _seconds(value: Any) -> float | None:
    """A duration setting as seconds, or None when it is not a duration."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _is_queue_name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_QUEUE_NAME_LENGTH


def _is_count(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _queue_problems(where: str, group: dict[str, Any]) -> list[Problem]:
    queues, policy = group.get("QUEUES", ["default"]), group.get("POLICY", "strict")
    if policy not in ("strict", "weighted"):
        return [Problem("backwave.E006", f"{where}['POLICY'] is {policy!r}.", "Use 'strict' or 'weighted'.")]
    if policy == "weighted":
        items = list(queues.items()) if isinstance(queues, dict) else None
        ok = bool(items) and all(_is_queue_name(q) and _is_count(w, 1) for q, w in items or [])
        hint = (
            "With POLICY 'weighted', write QUEUES as {'queue-name': weight, ...}: names of 1 to "
            f"{MAX_QUEUE_NAME_LENGTH} characters, each weight an int >= 1."
        )
    else:
        ok = (
            isinstance(queues, list | tuple)
            and bool(queues)
            and all(_is_queue_name(q) for q in queues)
            and len(set(queues)) == len(queues)
        )
        hint = (
            f"Write QUEUES as a list of distinct queue names (1 to {MAX_QUEUE_NAME_LENGTH} characters) in "
            "priority order, e.g. ['critical', 'default']."
        )
    return [] if ok else [Problem("backwave.E005", f"{where}['QUEUES'] is {queues!r}.", hint)]


def _group_problems(name: Any, group: Any) -> list[Problem]:
    where = f"BACKWAVE['GROUPS'][{name!r}]"
    if not isinstance(name, str) or not name:
        return [Problem("backwave.E003", f"Group name {name!r} is not a non-empty string.", "Name groups.")]
    if not isinstance(group, dict):
        return [Problem("backwave.E003", f"{where} is {group!r}.", "Each group is a dict of settings.")]
    found = [
        Problem("backwave.E004", f"{where} has an unknown key {key!r}.", f"Known keys: {sorted(GROUP_KEYS)}.")
        for key in group
        if key not in GROUP_KEYS
    ]
    found += _queue_problems(where, group)
    for key, (minimum, _) in GROUP_INTEGERS.items():
        if key in group and not _is_count(group[key], minimum):
            msg = f"{where}[{key!r}] is {group[key]!r}."
            found.append(Problem("backwave.E007", msg, f"Write an int >= {minimum}."))
    if "MAX_OUTCOME_BATCH" in group and not _is_count(group["MAX_OUTCOME_BATCH"], 1):
        msg = f"{where}['MAX_OUTCOME_BATCH'] is {group['MAX_OUTCOME_BATCH']!r}."
        found.append(
            Problem("backwave.E007", msg, "Write an int >= 1, or leave it out to use MAX_CLAIM_BATCH.")
        )
    for key, (zero_ok, _) in [*GROUP_DURATIONS.items(), ("HEARTBEAT_INTERVAL", (False, 0.0))]:
        if key in group:
            seconds = _seconds(group[key])
            if seconds is None or seconds < 0 or (seconds == 0 and not zero_ok):
                msg = f"{where}[{key!r}] is {group[key]!r}."
                least = "zero or more" if zero_ok else "greater than zero"
                hint = f"Write a number of seconds (e.g. 0.5) or a datetime.timedelta, {least}."
                found.append(Problem("backwave.E008", msg, hint))
    lease = _seconds(group.get("LEASE_DURATION", 60.0))
    beat = _seconds(group.get("HEARTBEAT_INTERVAL", (lease or 60.0) / 3))
    if lease and beat and lease > 0 and beat >= lease:
        msg = f"{where}: HEARTBEAT_INTERVAL ({beat:g} s) is not shorter than LEASE_DURATION ({lease:g} s)."
        hint = "Heartbeats must renew a lease before it lapses; leave HEARTBEAT_INTERVAL out (LEASE/3)."
        found.append(Problem("backwave.E009", msg, hint))
    return found


def problems(raw: Any = None) -> list[Problem]:
    """Every mistake in ``settings.BACKWAVE`` (or ``raw``), as system-check material."""
    raw = _raw() if raw is None else raw
    if not isinstance(raw, dict):
        return [Problem("backwave.E001", f"BACKWAVE is {type(raw).__name__}.", "Set BACKWAVE to a dict.")]
    found = [
        Problem(
            "backwave.E002", f"BACKWAVE has an unknown key {key!r}.", f"Known keys: {sorted(TOP_LEVEL_KEYS)}."
        )
        for key in raw
        if key not in TOP_LEVEL_KEYS
    ]
    groups = raw.get("GROUPS", {"default": DEFAULT_GROUP})
    if not isinstance(groups, dict) or not groups:
        hint = "Write GROUPS as {'default': {'QUEUES': ['default']}}."
        found.append(Problem("backwave.E003", f"BACKWAVE['GROUPS'] is {groups!r}.", hint))
    else:
        for name, group in groups.items():
            found += _group_problems(name, group)
    retry = raw.get("RETRY", {})
    if not isinstance(retry, dict) or set(retry) - RETRY_KEYS:
        hint = f"Write RETRY as a dict with keys among {sorted(RETRY_KEYS)}."
        found.append(Problem("backwave.E010", f"BACKWAVE['RETRY'] is {retry!r}.", hint))
    else:
        try:
            _retry_policy(retry)
        except (TypeError, ValueError) as exc:
            hint = "MAX_ATTEMPTS: an int >= 1. BACKOFF_BASE: a number >= 1. BACKOFF_CAP: 0 to 2592000 s."
            found.append(Problem("backwave.E010", f"BACKWAVE['RETRY'] is invalid: {exc}.", hint))
    size = raw.get("MAX_PAYLOAD_BYTES", 65536)
    if not _is_count(size, 1):
        msg = f"BACKWAVE['MAX_PAYLOAD_BYTES'] is {size!r}."
        found.append(Problem("backwave.E011", msg, "Write a positive int (bytes); the default is 65536."))
    alias = raw.get("DATABASE", "default")
    if alias not in django_settings.DATABASES:
        msg = f"BACKWAVE['DATABASE'] is {alias!r}, which is not in DATABASES."
        found.append(Problem("backwave.E012", msg, f"Use one of {sorted(django_settings.DATABASES)}."))
    if not isinstance(raw.get("HINTS", True), bool):
        found.append(Problem("backwave.E013", "BACKWAVE['HINTS'] is not a bool.", "Write True or False."))
    if not isinstance(raw.get("PREPARED_STATEMENTS", True), bool):
        msg = "BACKWAVE['PREPARED_STATEMENTS'] is not a bool."
        hint = "Write True, or False behind a connection pooler that cannot keep prepared statements."
        found.append(Problem("backwave.E016", msg, hint))
    manifest = raw.get("MANIFEST_PATH")
    if manifest is not None and not isinstance(manifest, str | Path):
        found.append(
            Problem("backwave.E015", "BACKWAVE['MANIFEST_PATH'] is not a path.", "Write a str or Path.")
        )
    return found


def _retry_policy(raw: dict[str, Any]) -> RetryPolicy:
    attempts = raw.get("MAX_ATTEMPTS", 10)
    if not _is_count(attempts, 1):
        raise ValueError(f"MAX_ATTEMPTS is {attempts!r}")
    base, cap = raw.get("BACKOFF_BASE", 2.0), _seconds(raw.get("BACKOFF_CAP", 300.0))
    if isinstance(base, bool) or not isinstance(base, int | float) or cap is None:
        raise TypeError("BACKOFF_BASE must be a number and BACKOFF_CAP a number of seconds or a timedelta")
    return RetryPolicy(max_attempts=attempts, backoff_base=base, backoff_cap=cap)


def _duration(group: dict[str, Any], key: str, default: float) -> timedelta:
    seconds = _seconds(group.get(key, default))
    return timedelta(seconds=default if seconds is None else seconds)


def _group(name: str, group: dict[str, Any]) -> GroupSettings:
    queues: Any = group.get("QUEUES", ["default"])
    weighted = group.get("POLICY", "strict") == "weighted"
    lease = _duration(group, "LEASE_DURATION", 60.0)
    batch = group.get("MAX_CLAIM_BATCH", 32)
    return GroupSettings(
        name=name,
        queues=tuple(queues),
        weights=tuple(queues.values()) if weighted else None,
        pool_size=group.get("POOL_SIZE", 20),
        pumps=group.get("PUMPS", 1),
        poll_interval=_duration(group, "POLL_INTERVAL", 1.0),
        lease_duration=lease,
        heartbeat_interval=_duration(group, "HEARTBEAT_INTERVAL", lease.total_seconds() / 3),
        max_claim_batch=batch,
        max_outcome_batch=group.get("MAX_OUTCOME_BATCH", batch),
        maintenance_interval=_duration(group, "MAINTENANCE_INTERVAL", 5.0),
        shutdown_grace=_duration(group, "SHUTDOWN_GRACE", 30.0),
    )


_cache: Settings | None = None


def get() -> Settings:
    """The parsed settings. Raises ImproperlyConfigured, listing every problem, when they are wrong."""
    global _cache
    if _cache is None:
        found = problems()
        if found:
            listing = "\n".join(f"{p.id}: {p.msg} {p.hint}" for p in found)
            raise ImproperlyConfigured(f"BACKWAVE settings are invalid:\n{listing}")
        raw = _raw()
        groups = raw.get("GROUPS", {"default": DEFAULT_GROUP})
        manifest = raw.get("MANIFEST_PATH")
        _cache = Settings(
            groups={name: _group(name, group) for name, group in groups.items()},
            retry=_retry_policy(raw.get("RETRY", {})),
            max_payload_bytes=raw.get("MAX_PAYLOAD_BYTES", 65536),
            database=raw.get("DATABASE", "default"),
            hints=raw.get("HINTS", True),
            manifest_path=Path(manifest) if manifest else None,
            prepared_statements=raw.get("PREPARED_STATEMENTS", True),
        )
    return _cache


def reload() -> None:
    """Forget the parsed settings, so the next :func:`get` reads ``settings.BACKWAVE`` again."""
    global _cache
    _cache = None


def _reset(*, setting: str, **_: Any) -> None:
    if setting in ("BACKWAVE", "DATABASES"):
        reload()


setting_changed.connect(_reset)


def default_group_settings(name: str = "default") -> GroupSettings:
    """A group with every default."""
    return _group(name, {})
