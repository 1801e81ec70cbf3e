"""Every BACKWAVE key, given hostile values: each is reported under the key's own check id, the checks never
raise, and every value that passes is safe to use (no overflow at ``now + duration``, no pool or batch too
large to run)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import threading
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.utils import timezone

from backwave_django import conf
from backwave_django.checks import check_settings
from backwave_django.conf_kinds import Count, Duration, Flag, Number
from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.core.retry import MAX_ATTEMPTS_LIMIT, MAX_BACKOFF_BASE, MAX_BACKOFF_SECONDS, RetryPolicy
from backwave_django.store.contract import NewJob
from backwave_django.store.mysql import MySQLStore, largest_storable_payload, max_allowed_packet

from ..contract.support import WORKER

deep: list[Any] = []
for _ in range(100_000):
    deep = [deep]

HOSTILE: list[Any] = [
    math.nan, math.inf, -math.inf, 1e15, -1e15, 3e11, 1e308, 10**400, 10**5000, 2**31, 2**63, -1, 0, 0.0,
    1e-9, True, False, "1", "", "default", None, [], ["default"], [1], (), {}, {"a": 1}, {"default": {}},
    dt.timedelta.max, dt.timedelta.min, dt.timedelta(seconds=-1), dt.timedelta(0),
    dt.timedelta(microseconds=1), Decimal("1"), Fraction(1, 2), 1 + 2j, b"1", object(), Path("x"), deep,
    [math.nan], {"QUEUES": {}},
]  # fmt: skip

TABLES = {"top": conf.TOP_LEVEL_KEYS, "group": conf.GROUP_KEYS, "retry": conf.RETRY_KEYS}
KEYS = [(where, name) for where, table in TABLES.items() for name in table]
QUEUE_IDS = {"backwave.E050", "backwave.E051", "backwave.E052"}
#: The ids a key's hostile values may raise: its own, and for GROUPS those of the groups inside it.
EXTRA_IDS = {
    "GROUPS": {"backwave.E017", "backwave.E018", "backwave.E004", "backwave.E005", *QUEUE_IDS},
    "QUEUES": QUEUE_IDS,  # a queue named wrongly or twice, a weight out of range
    "RETRY": {"backwave.E053"},  # a dict of unknown keys
    # a schedule named like a dict entry: every problem of the schedule inside it
    "SCHEDULES": {f"backwave.E0{n}" for n in range(31, 42)},
    "RETENTION": {"backwave.E042", "backwave.E043", "backwave.E044"},
    # an alias of DATABASES that is not PostgreSQL (on SQLite and MariaDB, 'default' itself)
    "LISTEN_DATABASE": {"backwave.E064"},
}


def errors() -> list[str]:
    """The ids of the errors the checks report (not the warnings about the test project's queues)."""
    return [message.id for message in check_settings() if message.is_serious()]


def placed(where: str, name: str, value: Any) -> dict[str, Any]:
    if name == "HEARTBEAT_INTERVAL":  # it must also be shorter than the lease: give it the longest
        return {"GROUPS": {"g": {name: value, "LEASE_DURATION": dt.timedelta(days=7)}}}
    if where == "group":
        return {"GROUPS": {"g": {name: value}}}
    if where == "retry":
        return {"RETRY": {name: value}}
    return {name: value}


@pytest.mark.parametrize(("where", "name"), KEYS)
def test_any_value_of_a_key_is_reported_under_its_own_id_and_never_raises(settings, where, name):
    key = TABLES[where][name]
    for value in HOSTILE:
        settings.BACKWAVE = placed(where, name, value)
        found = set(errors())
        assert found <= {key.check, *EXTRA_IDS.get(name, ())}, (name, value, found)
        if isinstance(key.kind, Count | Duration | Number | Flag):
            assert bool(found) is not key.kind.accepts(value), (name, value, found)
        if not found:
            conf.get()  # what passes the checks always parses


@pytest.mark.parametrize("value", [math.nan, math.inf, 1e15, 10**400, dt.timedelta.max, "x", None, [], True])
def test_manage_py_check_reports_a_hostile_value_and_never_crashes(settings, value):
    settings.BACKWAVE = {
        "GROUPS": {"g": {"LEASE_DURATION": value, "POOL_SIZE": value, "QUEUES": value}},
        "RETRY": {"BACKOFF_BASE": value, "MAX_ATTEMPTS": value},
        "MAX_PAYLOAD_BYTES": value,
    }
    with pytest.raises(SystemCheckError) as raised:
        call_command("check")
    for check in ("E005", "E007", "E011", "E022", "E027", "E028"):
        assert f"backwave.{check}" in str(raised.value)


def bounds(key: conf.Key) -> list[Any]:
    kind = key.kind
    if isinstance(kind, Count | Number):
        return [kind.low, kind.high]
    if isinstance(kind, Duration):
        return [kind.low, kind.high, dt.timedelta(seconds=kind.high)] + ([None] if kind.none_ok else [])
    return []


def just_outside(key: conf.Key) -> list[Any]:
    kind = key.kind
    step = 1 if isinstance(kind, Count) else 1e-6
    return [kind.low - step, kind.high + step] if isinstance(kind, Count | Duration | Number) else []


@pytest.mark.parametrize(("where", "name"), KEYS)
def test_the_bounds_of_every_range_pass_and_the_values_just_outside_do_not(settings, where, name):
    key = TABLES[where][name]
    for value in bounds(key):
        settings.BACKWAVE = placed(where, name, value)
        as_long_as_the_lease = name == "HEARTBEAT_INTERVAL" and value not in (None, key.kind.low)
        assert errors() == (["backwave.E009"] if as_long_as_the_lease else []), (name, value)
    for value in just_outside(key):
        settings.BACKWAVE = placed(where, name, value)
        assert errors() == [key.check], (name, value)


def largest(where: str) -> dict[str, Any]:
    table = TABLES[where]
    return {
        name: bounds(key)[1] for name, key in table.items() if bounds(key) and name != "HEARTBEAT_INTERVAL"
    }


def test_the_largest_values_that_pass_are_safe_to_use(settings):
    settings.BACKWAVE = {"GROUPS": {"g": largest("group")}, "RETRY": largest("retry"), **largest("top")}
    assert errors() == []
    parsed = conf.get()
    group = parsed.groups["g"]
    now = timezone.now()
    for duration in (group.lease_duration, group.heartbeat_interval, group.timeout, group.shutdown_grace):
        assert duration is not None and now + duration > now
    for wait in (group.poll_interval, group.maintenance_interval, group.shutdown_grace):
        assert wait.total_seconds() <= threading.TIMEOUT_MAX
    retry = parsed.retry
    assert (retry.max_attempts, retry.backoff_base) == (MAX_ATTEMPTS_LIMIT, MAX_BACKOFF_BASE)
    assert retry.backoff_cap == MAX_BACKOFF_SECONDS
    for attempt in (1, 64, MAX_ATTEMPTS_LIMIT - 1):
        due = retry.next_attempt_at(attempt, retry.max_attempts, now, key=2**63 - 1)
        assert due is not None and now <= due <= now + dt.timedelta(seconds=MAX_BACKOFF_SECONDS)
    assert (group.pool_size, group.max_claim_batch, group.max_outcome_batch) == (1000, 1000, 1000)


def test_the_smallest_durations_that_pass_never_round_to_zero(settings):
    smallest = {
        name: key.kind.low
        for name, key in conf.GROUP_KEYS.items()
        if isinstance(key.kind, Duration) and key.kind.low > 0
    }
    settings.BACKWAVE = {"GROUPS": {"g": smallest}}
    group = dataclasses.asdict(conf.get().groups["g"])
    assert all(group[name.lower()] > dt.timedelta(0) for name in smallest)


def test_a_group_times_out_its_attempts_after_30_minutes_unless_told_otherwise(settings):
    settings.BACKWAVE = {"GROUPS": {"a": {}, "b": {"TIMEOUT": 90}, "c": {"TIMEOUT": None}}}
    groups = conf.get().groups
    assert groups["a"].timeout == dt.timedelta(minutes=30)
    assert groups["b"].timeout == dt.timedelta(seconds=90)
    assert groups["c"].timeout is None


def test_jitter_is_on_unless_retry_turns_it_off(settings):
    del settings.BACKWAVE
    assert conf.get().retry.jitter is True
    settings.BACKWAVE = {"RETRY": {"JITTER": False}}
    assert conf.get().retry.jitter is False
    assert conf.get().retry.delay(3, key=7) == dt.timedelta(seconds=8)  # the whole backoff, 2 ** 3


def test_the_default_group_has_every_default():
    seconds = dt.timedelta(seconds=1)
    assert dataclasses.asdict(conf.default_group_settings("batch")) == {
        "name": "batch", "queues": ("default",), "weights": None,
        "pool_size": 20, "pumps": 1, "max_pumps": 2, "max_claim_batch": 32, "max_outcome_batch": 32,
        "poll_interval": seconds, "lease_duration": 60 * seconds, "heartbeat_interval": 20 * seconds,
        "maintenance_interval": 5 * seconds, "shutdown_grace": 30 * seconds, "timeout": 1800 * seconds,
    }  # fmt: skip
    assert conf.default_group_settings().name == "default"


def test_the_largest_batches_leases_and_payloads_that_pass_run_on_this_database(store):
    """POOL_SIZE, MAX_CLAIM_BATCH and MAX_OUTCOME_BATCH bound how many ids one statement carries."""
    pool, batch, outcomes = (
        conf.GROUP_KEYS[name].kind.high for name in ("POOL_SIZE", "MAX_CLAIM_BATCH", "MAX_OUTCOME_BATCH")
    )
    lease = dt.timedelta(seconds=conf.GROUP_KEYS["LEASE_DURATION"].kind.high)
    payload_limit = conf.TOP_LEVEL_KEYS["MAX_PAYLOAD_BYTES"].kind.high
    if isinstance(store, MySQLStore):  # the largest that backwave.E049 lets through on this server
        payload_limit = min(payload_limit, largest_storable_payload(max_allowed_packet(connection)))
    retry = RetryPolicy(
        max_attempts=MAX_ATTEMPTS_LIMIT, backoff_base=MAX_BACKOFF_BASE, backoff_cap=MAX_BACKOFF_SECONDS
    )
    now = timezone.now()
    big = NewJob(
        wire_name="tests.noop",
        queue="big",
        due_at=now,
        max_attempts=MAX_ATTEMPTS_LIMIT,
        payload=f'"{"x" * (payload_limit - 2)}"',
    )
    [stored] = store.enqueue([big], now=now, max_payload_bytes=payload_limit)
    new = dataclasses.replace(big, queue="default", payload="{}")
    store.enqueue([new] * max(pool, batch), now=now, max_payload_bytes=payload_limit)

    claimed = store.claim(worker_id=WORKER, queues=["default"], max_jobs=batch, lease_duration=lease, now=now)
    ids = [job.id for job in claimed]
    beats = store.heartbeat(worker_id=WORKER, job_ids=ids, lease_duration=lease, now=now + lease / 2)
    reports = [
        OutcomeReport(job_id=job.id, attempt=1, kind=OutcomeKind.FAILED, max_attempts=job.max_attempts)
        for job in claimed[:outcomes]
    ]
    result = store.report(worker_id=WORKER, reports=reports, retry=retry, now=now)

    assert len(claimed) == batch and all(beat.renewed for beat in beats)
    assert len(result.applied) == outcomes
    assert store.get_job(stored.id).payload == big.payload
