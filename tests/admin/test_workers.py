"""The Workers page: each Pump's group, id, host, health with its reason, last beat, jobs in flight."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from backwave_django.admin.workers import describe_age
from backwave_django.models import PumpStatus

from ..factories import LeasedJobFactory

pytestmark = pytest.mark.django_db

URL = "/admin/backwave_django/pumpstatus/"


def pump(worker_id: str = "host-a:12:default:x1", **fields: object) -> PumpStatus:
    now = timezone.now()
    values = {"group": "default", "host": "host-a", "pid": 12, "queues": "default,emails", "started_at": now}
    return PumpStatus.objects.create(worker_id=worker_id, last_beat_at=now, **{**values, **fields})


def test_the_workers_page_shows_health_reason_age_and_jobs_in_flight(viewer: Client) -> None:
    pump()
    pump("host-b:13:default:x2", host="host-b", health="degraded", detail="database <unreachable>")
    LeasedJobFactory(lease__owner="host-b:13:default:x2")
    response = viewer.get(URL)
    content = response.content.decode()
    assert response.status_code == 200
    assert "host-a:12:default:x1" in content and "degraded" in content
    assert "database &lt;unreachable&gt;" in content
    assert "s ago" in content and "default,emails" in content
    counts = {p.worker_id: p.in_flight_count for p in response.context["cl"].result_list}
    assert counts == {"host-a:12:default:x1": 0, "host-b:13:default:x2": 1}


def test_the_workers_page_is_read_only(operator: Client) -> None:
    status = pump()
    assert operator.get(f"{URL}add/").status_code == 403
    assert operator.get(f"{URL}{status.pk}/delete/").status_code == 403
    assert operator.post(f"{URL}{status.pk}/change/", {"health": "halted"}).status_code == 403
    status.refresh_from_db()
    assert status.health == "running"


def test_the_workers_page_needs_its_view_permission(login: Callable[..., Client]) -> None:
    assert login("view_job").get(URL).status_code == 403


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "5 s ago"), (600, "10 min ago"), (10800, "3 h ago"), (3 * 86400, "3 d ago"), (-3, "0 s ago")],
)
def test_ages_read_naturally(seconds: int, text: str) -> None:
    assert describe_age(timedelta(seconds=seconds)) == text
