"""The Overview page: linked from the index, counts, a server-drawn chart, oldest due job, workers' health."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from backwave_django.admin import chart
from backwave_django.models import Job, Outcome, PumpStatus

from ..factories import JobFactory

pytestmark = pytest.mark.django_db

URL = "/admin/backwave_django/joboverview/"


def test_the_overview_is_linked_from_the_admin_index(viewer: Client) -> None:
    assert URL in viewer.get("/admin/").content.decode()


def test_the_overview_needs_the_job_view_permission(login: Callable[..., Client]) -> None:
    assert login().get(URL).status_code == 403


def test_the_overview_shows_counts_chart_oldest_due_and_workers(viewer: Client) -> None:
    now = timezone.now()
    done = JobFactory(queue="emails", state=Job.State.SUCCEEDED, terminal_at=now - timedelta(minutes=2))
    JobFactory(queue="emails", due_at=now - timedelta(minutes=30))
    Outcome.objects.create(
        job=done, attempt=1, kind="failed", state_after="scheduled", recorded_at=now - timedelta(minutes=3)
    )
    PumpStatus.objects.create(
        worker_id="h:1:default:a", group="default", host="h", pid=1, health="halted",
        detail="<b>stuck</b>", started_at=now, last_beat_at=now,
    )  # fmt: skip
    response = viewer.get(URL)
    content = response.content.decode()
    assert response.status_code == 200
    assert "1 succeeded, 1 failed" in content
    chart = content[content.index('<svg id="backwave-chart"') :]
    chart = chart[: chart.index("</svg>")]
    assert (
        chart.count("<rect") == 2
        and "<script" not in chart
        and "http" not in chart.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    emails = next(row for row in response.context["rows"] if row.queue == "emails")
    assert (str(emails.depths["scheduled"]), str(emails.depths["succeeded"])) == ("1", "1")
    assert [(queue, age) for queue, _, age in response.context["oldest_due"]] == [("emails", "30 min ago")]
    assert "halted" in content and "&lt;b&gt;stuck&lt;/b&gt;" in content


def test_the_overview_renders_with_an_empty_database(viewer: Client) -> None:
    content = viewer.get(URL).content.decode()
    assert "0 succeeded, 0 failed" in content and "No pump has reported." in content


def test_outcomes_older_than_an_hour_are_left_out() -> None:
    now = timezone.now()
    JobFactory(state=Job.State.SUCCEEDED, terminal_at=now - timedelta(minutes=61))
    JobFactory(state=Job.State.SUCCEEDED, terminal_at=now)
    _, succeeded, failed = chart.outcomes_per_minute(now)
    assert (sum(succeeded), succeeded[-1], sum(failed)) == (1, 1, 0)


def test_bars_are_scaled_to_the_busiest_minute() -> None:
    now = timezone.now()
    bars = chart.bars(now, [4] + [0] * 59, [4, 2] + [0] * 58)
    assert (bars[0].succeeded_height, bars[0].failed_height, bars[0].failed_y) == (60.0, 60.0, 0.0)
    assert bars[1].failed_height == 30.0 and bars[1].x == chart.BAR_WIDTH


def test_the_overview_has_no_per_job_pages_that_would_show_payloads(viewer: Client) -> None:
    job = JobFactory(payload='{"token": "s3cr3t"}')
    for suffix in ("change/", "history/", "delete/", ""):
        response = viewer.get(f"{URL}{job.id}/{suffix}", follow=True)
        assert "s3cr3t" not in response.content.decode(), suffix
        assert response.status_code == 404, suffix


def test_the_overview_shows_the_oldest_finished_job_per_state_and_its_retention(
    viewer: Client, settings
) -> None:
    now = timezone.now()
    settings.BACKWAVE = {**settings.BACKWAVE, "RETENTION": {"SUCCEEDED": timedelta(days=2), "FAILED": None}}
    JobFactory(state=Job.State.SUCCEEDED, terminal_at=now - timedelta(days=3))
    JobFactory(state=Job.State.SUCCEEDED, terminal_at=now - timedelta(hours=1))
    JobFactory(state=Job.State.DEAD_LETTERED, terminal_at=now - timedelta(days=40))
    rows = viewer.get(URL).context["oldest_finished"]
    assert [(state, age, kept) for state, _, age, kept in rows] == [
        ("dead-lettered", "40 d ago", "for ever"),
        ("succeeded", "3 d ago", "2 d"),
    ]
