"""What keeps the admin fast on big tables: bounded counts, the planner's estimate, and the fill command."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from backwave_django.admin import paging
from backwave_django.admin.paging import BoundedPaginator
from backwave_django.models import Job, Outcome

from ..conftest import on_postgres
from ..factories import JobFactory

pytestmark = pytest.mark.django_db


def test_counts_are_exact_below_the_bound() -> None:
    JobFactory.create_batch(3)
    assert BoundedPaginator(Job.objects.order_by("id"), 2).count == 3


def test_counts_stop_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paging, "BOUND", 2)
    JobFactory.create_batch(5)
    assert BoundedPaginator(Job.objects.filter(state="scheduled").order_by("id"), 2).count == 3


def test_the_unfiltered_count_uses_the_estimate_on_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    if not on_postgres():
        pytest.skip("the estimate is PostgreSQL's pg_class.reltuples")
    monkeypatch.setattr(paging, "BOUND", 2)
    JobFactory.create_batch(5)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE backwave_django_job")
    with CaptureQueriesContext(connection) as queries:
        assert BoundedPaginator(Job.objects.order_by("id"), 2).count == 5
    assert "reltuples" in queries[0]["sql"] and len(queries) == 1


def test_lists_never_run_an_unbounded_count(viewer: Client) -> None:
    JobFactory.create_batch(3)
    for url in ("/admin/backwave_django/job/", "/admin/backwave_django/quarantinedjob/"):
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get(url, {"state__exact": "scheduled"} if "/job/" in url else {}).status_code == 200
        counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
        assert counts and all("LIMIT" in sql.upper() for sql in counts), counts


def test_the_fill_command_inserts_a_mix_of_states_with_outcomes() -> None:
    out = io.StringIO()
    call_command("backwave_fill", count=200, stdout=out)
    assert "inserted 200 jobs" in out.getvalue()
    states = set(Job.objects.values_list("state", flat=True))
    assert Job.objects.count() == 200
    assert {"succeeded", "scheduled", "dead_lettered", "quarantined", "cancelled"} == states
    assert Outcome.objects.count() == Job.objects.filter(state="dead_lettered").count() > 0
    assert not Job.objects.filter(state="quarantined").exclude(wire_name="demo.retired").exists()
