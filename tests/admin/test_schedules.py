"""The Schedules page: the list, a schedule's page, and pause / resume / run now through the operations."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client

from backwave_django.models import AuditRecord, Job, Schedule

from ..conftest import T0
from ..factories import ScheduleFactory
from .conftest import VIEW

pytestmark = pytest.mark.django_db

URL = "/admin/backwave_django/schedule/"
OPERATE = [*VIEW, "view_schedule", "operate_schedule"]


@pytest.fixture
def schedule_viewer(login: Callable[..., Client]) -> Client:
    return login(*VIEW, "view_schedule", username="viewer")


@pytest.fixture
def schedule_operator(login: Callable[..., Client]) -> Client:
    return login(*OPERATE, username="operator")


def act(client: Client, action: str, *names: str) -> str:
    response = client.post(URL, {"action": action, "_selected_action": list(names)}, follow=True)
    return response.content.decode()


def test_the_list_shows_cadence_next_and_last_run_and_skips(schedule_viewer: Client) -> None:
    skips = [(T0 - timedelta(hours=n)).isoformat() for n in (3, 2)]
    ScheduleFactory(name="hourly", skipped_count=7, recent_skips=json.dumps(skips), last_run_at=T0)
    ScheduleFactory(name="nightly", cron="30 2 * * *", timezone="Europe/Paris", paused=True)
    ScheduleFactory(name="gone", cron="", every=timedelta(minutes=45), removed_at=T0)
    content = schedule_viewer.get(URL).content.decode()
    for text in ("cron 0 * * * *", "cron 30 2 * * *", "every 45m", "Europe/Paris", "paused", "removed"):
        assert text in content
    assert "and 1 before" in content  # two recent skips: the newest and a count
    page = schedule_viewer.get(f"{URL}hourly/change/").content.decode()
    assert "2026-01-01 01:00:00" in page  # the next run after the cursor


def test_without_the_view_permission_the_page_is_refused(login: Callable[..., Client]) -> None:
    assert login(*VIEW).get(URL).status_code == 403


def test_a_viewer_has_no_actions(schedule_viewer: Client) -> None:
    ScheduleFactory(name="hourly")
    content = act(schedule_viewer, "pause_schedules", "hourly")
    assert not Schedule.objects.get(name="hourly").paused
    assert "No action selected" in content or "pause_schedules" not in content


def test_pause_resume_and_run_now_are_audited_with_the_actor(schedule_operator: Client) -> None:
    ScheduleFactory(name="hourly")
    assert "Paused: hourly" in act(schedule_operator, "pause_schedules", "hourly")
    assert Schedule.objects.get(name="hourly").paused
    assert "Resumed: hourly" in act(schedule_operator, "resume_schedules", "hourly")
    assert "Ran now: hourly" in act(schedule_operator, "run_now", "hourly")
    run = Job.objects.get(schedule="hourly")
    assert (run.wire_name, run.queue, run.state) == ("tests.tick", "default", "scheduled")
    actions = list(AuditRecord.objects.order_by("id").values_list("actor", "action", "target"))
    assert actions == [
        ("operator", "pause_schedule", "hourly"),
        ("operator", "resume_schedule", "hourly"),
        ("operator", "trigger_schedule", "hourly"),
    ]


def test_a_removed_schedule_is_not_operated_and_says_why(schedule_operator: Client) -> None:
    ScheduleFactory(name="gone", removed_at=T0)
    assert "removed from the settings" in act(schedule_operator, "run_now", "gone")
    assert not Job.objects.exists()


def test_the_arguments_need_the_payload_permission(
    schedule_viewer: Client, login: Callable[..., Client]
) -> None:
    ScheduleFactory(name="hourly", payload='{"secret": "s3cr3t"}')
    assert "s3cr3t" not in schedule_viewer.get(f"{URL}hourly/change/").content.decode()
    reader = login(*VIEW, "view_schedule", "view_job_payload", username="reader")
    assert "s3cr3t" in reader.get(f"{URL}hourly/change/").content.decode()


@pytest.mark.parametrize("name", ["a b", "x" * 200, "\x00", "../../etc"])
def test_a_hostile_id_is_a_missing_schedule(schedule_viewer: Client, name: str) -> None:
    response = schedule_viewer.get(f"{URL}{name}/change/", follow=True)
    assert response.status_code == 200
    assert "No schedule has that id" in response.content.decode()


def test_only_the_paused_filter_is_accepted(schedule_viewer: Client) -> None:
    assert schedule_viewer.get(URL, {"paused__exact": "1"}).status_code == 200
    assert schedule_viewer.get(URL, {"payload__contains": "s"}).status_code == 400
    assert "not one of" in schedule_viewer.get(URL, {"paused__exact": "yes"}, follow=True).content.decode()
