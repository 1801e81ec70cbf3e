"""Recurring schedules end to end with the test pump on a virtual clock: the settings, the minting, the
misfire policies, no-overlap, time zones, and what a handler is told."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from backwave_django import pause_queue, pause_schedule, resume_queue, resume_schedule, trigger_schedule
from backwave_django.checks import check_settings
from backwave_django.models import AuditRecord, Job, Schedule
from backwave_django.store.memory import MemoryStore
from backwave_django.testing import TestPump

from .. import jobs

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GROUPS = {"default": {"QUEUES": ["default", "slow"]}}
pytestmark = pytest.mark.django_db


def schedules(settings, **entries: dict) -> None:
    settings.BACKWAVE = {"GROUPS": GROUPS, "SCHEDULES": entries}


def ticks_run() -> list[datetime]:
    return [tick for _, tick in jobs.ticks]


@pytest.fixture(autouse=True)
def _fresh_ticks():
    jobs.ticks.clear()


def test_a_year_of_an_hourly_schedule_mints_8760_jobs_each_for_its_tick(settings):
    # The memory store: the same Driver and planner, no database (`backwave_bench --only schedules` times it).
    schedules(settings, hourly={"JOB": "tests.tick", "CRON": "0 * * * *"})
    store = MemoryStore()
    with TestPump(start=T0, store=store) as pump:
        pump.advance(timedelta(days=365))
    assert len(jobs.ticks) == 8760
    assert ticks_run() == [T0 + timedelta(hours=n) for n in range(1, 8761)]
    (row,) = store.list_schedules()
    assert (row.cursor, row.last_run_at, row.skipped_count) == (T0 + timedelta(days=365),) * 2 + (0,)


def test_a_week_of_an_hourly_schedule_on_the_database(settings):
    schedules(settings, hourly={"JOB": "tests.tick", "CRON": "0 * * * *"})
    with TestPump(start=T0) as pump:
        pump.advance(timedelta(days=7))
    assert ticks_run() == [T0 + timedelta(hours=n) for n in range(1, 7 * 24 + 1)]
    assert Job.objects.filter(schedule="hourly", state="succeeded").count() == 7 * 24


def test_a_three_week_outage_with_coalesce_runs_exactly_one_make_up_run(settings):
    schedules(settings, hourly={"JOB": "tests.tick", "CRON": "0 * * * *", "MISFIRE": "coalesce"})
    with TestPump(start=T0) as pump:
        pump.now = T0 + timedelta(weeks=3, minutes=30)  # nothing ran for three weeks
        pump.run_due()
        pump.advance(timedelta(hours=2))
    outage_end = T0 + timedelta(weeks=3)
    assert ticks_run() == [outage_end, outage_end + timedelta(hours=1), outage_end + timedelta(hours=2)]
    assert Schedule.objects.get(name="hourly").skipped_count == 3 * 7 * 24 - 1


def test_a_three_week_outage_with_skip_runs_none_and_counts_what_it_skipped(settings):
    schedules(settings, hourly={"JOB": "tests.tick", "CRON": "0 * * * *"})
    with TestPump(start=T0) as pump:
        pump.now = T0 + timedelta(weeks=3, minutes=30)
        pump.run_due()
        assert ticks_run() == []
        pump.advance(timedelta(hours=1))
    assert ticks_run() == [T0 + timedelta(weeks=3, hours=1)]
    row = Schedule.objects.get(name="hourly")
    assert row.skipped_count == 3 * 7 * 24
    assert row.recent_skips.count("T") == 32  # the newest 32 ticks are kept by time


def test_no_overlap_skips_ticks_while_the_last_run_is_live(settings):
    schedules(
        settings,
        report={"JOB": "tests.tick", "CRON": "0 * * * *", "QUEUE": "slow", "NO_OVERLAP": True},
    )
    with TestPump(start=T0) as pump:
        pause_queue("slow", actor="ops")  # the 01:00 run waits, live, in a paused queue
        pump.advance(timedelta(hours=2))  # 02:00: the 01:00 run is still live: skipped
        minted = list(Job.objects.filter(schedule="report").values_list("scheduled_for", flat=True))
        assert minted == [T0 + timedelta(hours=1)]
        resume_queue("slow", actor="ops")
        pump.advance(timedelta(hours=1))  # the 01:00 run finishes; 03:00 is minted and runs
    assert ticks_run() == [T0 + timedelta(hours=1), T0 + timedelta(hours=3)]
    assert Schedule.objects.get(name="report").skipped_count == 1


@pytest.mark.parametrize(
    ("zone", "spring", "autumn"),
    [
        ("Europe/Paris", datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
        ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 7, 30, tzinfo=UTC)),
    ],
)
def test_a_daily_schedule_fires_once_a_day_across_both_dst_changes(settings, zone, spring, autumn):
    schedules(settings, nightly={"JOB": "tests.tick", "CRON": "30 2 * * *", "TIMEZONE": zone})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with TestPump(start=start, store=MemoryStore()) as pump:
        pump.advance(timedelta(days=365))
    run = ticks_run()
    assert len(run) == 365
    local = ZoneInfo(zone)
    assert spring in run  # the 02:30 that does not exist ran at 03:00, once
    assert autumn in run  # the 02:30 that exists twice ran once
    days = Counter(t.astimezone(local).date() for t in run)
    assert set(days.values()) == {1}


def test_six_fields_and_fixed_intervals(settings):
    schedules(
        settings,
        seconds={"JOB": "tests.tick", "CRON": "0 0 * * * 30"},  # at second 30 of each midnight minute
        every={"JOB": "tests.tick", "EVERY": timedelta(minutes=45), "QUEUE": "slow"},
    )
    with TestPump(start=T0) as pump:
        pump.advance(timedelta(days=1))
    by_schedule = Counter(Job.objects.values_list("schedule", flat=True))
    assert by_schedule == {"seconds": 1, "every": 32}
    assert T0 + timedelta(days=1) in ticks_run()  # the 32nd interval ends at the day's end
    assert datetime(2026, 1, 2, 0, 0, 30, tzinfo=UTC) not in ticks_run()  # beyond the day
    assert T0 + timedelta(seconds=30) in ticks_run()


def test_a_handler_is_told_the_tick_it_was_minted_for(settings):
    schedules(settings, hourly={"JOB": "tests.tick", "CRON": "0 * * * *"})
    with TestPump(start=T0) as pump:
        pump.advance(timedelta(hours=2, minutes=30))
    assert jobs.ticks == [
        (job.id, job.scheduled_for) for job in Job.objects.filter(schedule="hourly").order_by("id")
    ]


def test_the_kwargs_are_the_arguments_of_every_run(settings):
    schedules(settings, sums={"JOB": "tests.add", "EVERY": 60, "KWARGS": {"a": 2, "b": 3}})
    with TestPump(start=T0) as pump:
        ran = pump.advance(timedelta(minutes=2))
    assert [e.outcome for e in ran] == ["succeeded", "succeeded"]
    assert set(Job.objects.values_list("payload", flat=True)) == {'{"a":2,"b":3}'}


def test_operators_pause_resume_and_run_a_schedule_now(settings):
    schedules(settings, hourly={"JOB": "tests.tick", "CRON": "0 * * * *"})
    # No explicit start: operator actions stamp the wall clock, and this pump never lags it.
    with TestPump() as pump:
        assert pause_schedule("hourly", actor="ops")
        pump.advance(timedelta(hours=2))
        assert ticks_run() == []
        assert resume_schedule("hourly", actor="ops")
        assert trigger_schedule("hourly", actor="ops") == "triggered"
        pump.advance(timedelta(hours=1))
    assert len(ticks_run()) == 2  # the run now, and the next hour
    assert Schedule.objects.get(name="hourly").skipped_count == 2
    assert AuditRecord.objects.filter(actor="ops").count() == 3


def test_run_now_is_an_operator_override_that_no_overlap_does_not_refuse(settings):
    schedules(
        settings,
        report={"JOB": "tests.tick", "CRON": "0 * * * *", "QUEUE": "slow", "NO_OVERLAP": True},
    )
    runs = Job.objects.filter(schedule="report")
    with TestPump() as pump:  # the wall clock: the operator functions stamp it
        pause_queue("slow", actor="ops")
        pump.advance(timedelta(hours=1))  # the next o'clock run is minted and waits, live
        assert runs.count() == 1
        assert trigger_schedule("report", actor="ops") == "triggered"  # minted although a run is live
        assert runs.count() == 2
        pump.advance(timedelta(hours=1))  # the next tick finds live runs (the run now among them): skipped
        assert runs.count() == 2
        resume_queue("slow", actor="ops")
        pump.run_due()
    assert len(ticks_run()) == 2
    assert Schedule.objects.get(name="report").skipped_count == 1


def test_a_schedule_removed_from_the_settings_stops(settings):
    schedules(settings, hourly={"JOB": "tests.tick", "CRON": "0 * * * *"})
    TestPump(start=T0)
    schedules(settings)
    with TestPump(start=T0) as pump:
        pump.advance(timedelta(hours=3))
    assert ticks_run() == []
    assert Schedule.objects.get(name="hourly").removed_at == T0


# -- the checks ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "check"),
    [
        ({"bad name": {"JOB": "tests.tick", "CRON": "0 * * * *"}}, "backwave.E031"),
        ({"s": ["not", "a", "dict"]}, "backwave.E031"),
        ({"s": {"JOB": "tests.unknown", "CRON": "0 * * * *"}}, "backwave.E032"),
        ({"s": {"CRON": "0 * * * *"}}, "backwave.E032"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * *"}}, "backwave.E033"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 0 30 2 *"}}, "backwave.E033"),
        ({"s": {"JOB": "tests.tick", "EVERY": 0.5}}, "backwave.E034"),
        ({"s": {"JOB": "tests.tick", "EVERY": float("nan")}}, "backwave.E034"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "TIMEZONE": "Mars/Base"}}, "backwave.E035"),
        ({"s": {"JOB": "tests.add", "CRON": "0 * * * *", "KWARGS": {"a": 1}}}, "backwave.E036"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "KWARGS": [1]}}, "backwave.E036"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "MISFIRE": "later"}}, "backwave.E037"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "NO_OVERLAP": "yes"}}, "backwave.E038"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "QUEUE": "a b"}}, "backwave.E039"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "TZ": "UTC"}}, "backwave.E040"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "EVERY": 60}}, "backwave.E041"),
        ({"s": {"JOB": "tests.tick"}}, "backwave.E041"),
        ({"s": {"JOB": "tests.tick", "CRON": "0 * * * *", "QUEUE": "nobody-serves-it"}}, "backwave.W003"),
    ],
)
def test_every_mistake_in_a_schedule_has_its_own_check(settings, entries, check):
    settings.BACKWAVE = {"GROUPS": GROUPS, "SCHEDULES": entries}
    found = {message.id for message in check_settings()}
    assert check in found


@pytest.mark.parametrize(
    ("retention", "check"),
    [
        ({"SUCCEEDED": 0}, "backwave.E042"),
        ({"FAILED": "two weeks"}, "backwave.E043"),
        ({"KEEP": 1}, "backwave.E044"),
        ({"QUEUES": {"a b": {}}}, "backwave.E044"),
        ({"QUEUES": {"reports": {"SUCCEEDED": None, "OTHER": 1}}}, "backwave.E044"),
        ([], "backwave.E044"),
    ],
)
def test_every_mistake_in_retention_has_its_check(settings, retention, check):
    settings.BACKWAVE = {"GROUPS": GROUPS, "RETENTION": retention}
    assert check in {message.id for message in check_settings()}
