"""backwave_schedules and backwave_purge, on the real database."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from backwave_django.models import AuditRecord, Job, Outcome, Schedule

from ..conftest import T0
from ..factories import JobFactory, ScheduleFactory

pytestmark = pytest.mark.django_db
GROUPS = {"default": {"QUEUES": ["default", "slow"]}}


def run(*args: str, **options: object) -> str:
    out = StringIO()
    call_command(*args, stdout=out, **options)
    return out.getvalue()


# -- backwave_schedules ----------------------------------------------------------------------------


def test_schedules_lists_cadence_zone_next_last_skipped_and_status(settings):
    settings.BACKWAVE = {"GROUPS": GROUPS}
    ScheduleFactory(name="nightly", cron="30 2 * * *", timezone="Europe/Paris", skipped_count=3,
                    recent_skips=json.dumps([T0.isoformat()]), last_run_at=T0)  # fmt: skip
    ScheduleFactory(name="paused-one", paused=True)
    ScheduleFactory(name="gone", removed_at=T0)
    out = run("backwave_schedules")
    assert "nightly  [active]  cron 30 2 * * *  (Europe/Paris, misfire skip)" in out
    assert "next run  2026-01-01 02:30:00+01:00 (2026-01-01 01:30:00 UTC)" in out
    assert "skipped   3 tick(s), latest 2026-01-01 01:00:00+01:00" in out
    assert "paused-one  [paused]" in out and "next run  -" in out
    assert "gone  [removed]" in out


def test_schedules_says_what_the_settings_hold_that_is_not_stored_and_sync_stores_it(settings):
    settings.BACKWAVE = {
        "GROUPS": GROUPS,
        "SCHEDULES": {"hourly": {"JOB": "tests.tick", "CRON": "0 * * * *"}},
    }
    assert "not stored yet: hourly" in run("backwave_schedules")
    out = run("backwave_schedules", "--sync")
    assert "added: hourly" in out and "hourly  [active]" in out
    assert Schedule.objects.filter(name="hourly").exists()


def test_schedules_json_is_one_object_per_line(settings):
    settings.BACKWAVE = {"GROUPS": GROUPS}
    ScheduleFactory(name="every", cron="", every=timedelta(minutes=45))
    (line,) = run("backwave_schedules", "--json").splitlines()
    about = json.loads(line)
    assert (about["name"], about["cadence"], about["status"]) == ("every", "every 45m", "active")
    assert about["next_run"] == str(T0 + timedelta(minutes=45))


# -- backwave_purge --------------------------------------------------------------------------------


def finished(state: str, age: timedelta, queue: str = "default") -> Job:
    job = JobFactory(queue=queue, state=state, attempt=1, terminal_at=timezone.now() - age)
    Outcome.objects.create(job=job, attempt=1, kind="succeeded", state_after=state, recorded_at=T0)
    return job


def test_purge_follows_the_retention_settings_with_outcomes_and_keeps_the_rest(settings):
    settings.BACKWAVE = {"GROUPS": GROUPS, "RETENTION": {"SUCCEEDED": 3600, "FAILED": timedelta(days=7)}}
    old = [finished("succeeded", timedelta(hours=2)), finished("dead_lettered", timedelta(days=8))]
    kept = [finished("succeeded", timedelta(minutes=5)), finished("dead_lettered", timedelta(days=2))]
    live = JobFactory(queue="default")
    assert "would purge 2 finished job(s)" in run("backwave_purge", "--dry-run")
    assert Job.objects.count() == 5
    assert "purged 2 finished job(s) in 1 batch(es)" in run("backwave_purge")
    assert set(Job.objects.values_list("id", flat=True)) == {kept[0].id, kept[1].id, live.id}
    assert not Outcome.objects.filter(job_id__in=[j.id for j in old]).exists()


def test_purge_older_than_and_by_queue_in_batches(settings):
    settings.BACKWAVE = {"GROUPS": GROUPS, "RETENTION": {"SUCCEEDED": None, "FAILED": None}}
    for _ in range(5):
        finished("succeeded", timedelta(days=2), queue="slow")
    finished("quarantined", timedelta(days=2), queue="default")
    assert "Nothing to purge" in run("backwave_purge")
    out = run("backwave_purge", "--older-than", "1d", "--queue", "slow", "--batch", "2")
    assert "purged 5 finished job(s) in 3 batch(es)" in out
    assert list(Job.objects.values_list("queue", flat=True)) == ["default"]


@pytest.mark.parametrize("older_than", ["1d", timedelta(days=1)])
@pytest.mark.parametrize("queue", ["slow", ["slow"]])
def test_purge_through_call_command_takes_keywords_as_a_user_writes_them(settings, older_than, queue):
    settings.BACKWAVE = {"GROUPS": GROUPS, "RETENTION": {"SUCCEEDED": None, "FAILED": None}}
    finished("succeeded", timedelta(days=2), queue="slow")
    finished("succeeded", timedelta(days=2), queue="default")
    out = StringIO()
    call_command("backwave_purge", older_than=older_than, queue=queue, stdout=out)
    assert "purged 1 finished job(s)" in out.getvalue()
    assert list(Job.objects.values_list("queue", flat=True)) == ["default"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"older_than": "soon"}, "argument --older-than: 'soon' is not an age"),
        ({"older_than": timedelta(0)}, r"argument --older-than: datetime.timedelta\(0\) is not an age from"),
        ({"older_than": timedelta(days=-1)}, "argument --older-than: .* is not an age from a microsecond"),
        ({"older_than": timedelta(days=4000)}, "argument --older-than: .* is not an age from a microsecond"),
        ({"older_than": "0.0000004"}, "argument --older-than: '0.0000004' is not an age"),  # rounds to 0
        ({"older_than": 30}, "argument --older-than: 30 is not an age"),
        ({"queue": "bad queue"}, "argument --queue: "),
        ({"queue": []}, "argument --queue: an empty list names none; leave --queue out"),
        ({"queue": 5}, "argument --queue: 5 is not a name"),
        ({"queue": b"slow"}, "argument --queue: b'slow' is not a name"),
        ({"batch": "many"}, "--batch is 'many'; use 1 to 10000"),
        ({"batch": "\u00b2"}, "--batch is '\u00b2'; use 1 to 10000"),  # a digit to isdigit(), not to int()
        ({"batch": "9" * 5000}, "--batch is '9999.*; use 1 to 10000"),
        ({"batch": True}, "--batch is True; use 1 to 10000"),
        ({"batch": 0}, "--batch is 0; use 1 to 10000"),
    ],
)
def test_purge_refuses_bad_keywords_as_it_refuses_bad_flags(settings, options, message):
    settings.BACKWAVE = {"GROUPS": GROUPS}
    finished("succeeded", timedelta(days=30))
    with pytest.raises(CommandError, match=message):
        call_command("backwave_purge", **options)
    assert Job.objects.count() == 1


def test_purge_refuses_a_bad_keyword_even_with_nothing_stored(settings):
    settings.BACKWAVE = {"GROUPS": GROUPS}
    with pytest.raises(CommandError, match="argument --older-than: 'soon' is not an age"):
        call_command("backwave_purge", older_than="soon")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "soon"], "is not an age"),
        (["--older-than", "0"], "is not an age"),
        (["--older-than", "99999d"], "at most 10 years"),
        (["--queue", "a b"], "is not valid"),
        (["--batch", "0"], "use 1 to 10000"),
    ],
)
def test_purge_refuses_bad_arguments_with_a_clear_message(settings, args, message):
    settings.BACKWAVE = {"GROUPS": GROUPS}
    finished("succeeded", timedelta(days=30))
    with pytest.raises(CommandError, match=message):
        call_command("backwave_purge", *args)
    assert Job.objects.count() == 1
    assert not AuditRecord.objects.exists()
