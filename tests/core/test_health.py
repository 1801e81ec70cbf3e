"""A Pump's health and how a worker group's is read from its Pumps'."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.core.health import GroupHealth, Health, Observed, group_health, observe, silent_after

R, D, H, S = Health.RUNNING, Health.DEGRADED, Health.HALTED, Health.STOPPED

GROUPS = [
    pytest.param([R, R], GroupHealth.RUNNING, id="every pump running: running"),
    pytest.param([R, D], GroupHealth.DEGRADED, id="one degraded pump: degraded"),
    pytest.param([D, D], GroupHealth.DEGRADED, id="every pump degraded: degraded"),
    pytest.param(
        [R, H], GroupHealth.PARTIALLY_HALTED, id="one halted pump among running ones: partially halted"
    ),
    pytest.param([D, H, R], GroupHealth.PARTIALLY_HALTED, id="a halt outranks a degradation"),
    pytest.param(
        [H, S], GroupHealth.PARTIALLY_HALTED, id="a halted pump beside a stopped one: partially halted"
    ),
    pytest.param([H, H], GroupHealth.HALTED, id="halted only when every pump is"),
    pytest.param([H], GroupHealth.HALTED, id="a lone halted pump: halted"),
    pytest.param([S, S], GroupHealth.STOPPED, id="every pump stopped: stopped"),
    pytest.param([S, R], GroupHealth.RUNNING, id="a stopped pump beside a running one: running"),
    pytest.param([S, D], GroupHealth.DEGRADED, id="a stopped pump beside a degraded one: degraded"),
    pytest.param([], GroupHealth.RUNNING, id="no pumps: running (the pump count says the rest)"),
]


@pytest.mark.parametrize(("pumps", "expected"), GROUPS)
def test_a_group_is_as_healthy_as_its_pumps_say(pumps, expected):
    assert group_health(pumps) is expected


def test_the_group_health_reads_any_iterable_once():
    assert group_health(h for h in (R, H)) is GroupHealth.PARTIALLY_HALTED


def test_health_values_are_what_the_status_table_stores():
    assert [h.value for h in Health] == ["running", "degraded", "halted", "stopped"]
    assert GroupHealth.PARTIALLY_HALTED == "partially halted"


# -- how an observer reads a Pump's recorded status ------------------------------------------------------

BEAT = timedelta(seconds=20)


@pytest.mark.parametrize(
    ("health", "age", "seen"),
    [
        (Health.RUNNING, 10, Observed.RUNNING),
        (Health.DEGRADED, 59, Observed.DEGRADED),
        (Health.RUNNING, 61, Observed.SILENT),  # three beats missed
        (Health.DEGRADED, 61, Observed.SILENT),
        (Health.HALTED, 3600, Observed.HALTED),  # a halted pump says so for good
        (Health.STOPPED, 3600, Observed.STOPPED),
    ],
)
def test_a_pump_that_misses_three_beats_is_silent_unless_it_said_it_halted_or_stopped(health, age, seen):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert observe(health, now - timedelta(seconds=age), now, BEAT) is seen
    assert seen.serving is (seen in (Observed.RUNNING, Observed.DEGRADED))


def test_silence_is_never_judged_on_less_than_fifteen_seconds():
    assert silent_after(timedelta(seconds=1)) == timedelta(seconds=15)
    assert silent_after(timedelta(seconds=20)) == timedelta(seconds=60)
