"""The health endpoint (``backwave_django.urls``): each group's health from the Pumps' heartbeats, with
liveness and readiness, the same answer ``backwave_health`` gives, and nothing about jobs."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError
from django.utils import timezone

from backwave_django.core.health import Health
from backwave_django.store import get_store

pytestmark = pytest.mark.django_db

GROUPS = {"default": {"QUEUES": ["default"]}, "batch": {"QUEUES": ["reports"]}}
SILENT = timedelta(minutes=5)  # older than any group's silence threshold (three beats, at least 15 s)

#: Pump states per group, and whether each group is live and ready.
SCENARIOS = {
    "no-pumps": ({}, {"default": (False, False)}),
    "running": ({"default": [Health.RUNNING]}, {"default": (True, True)}),
    "degraded": ({"default": [Health.DEGRADED]}, {"default": (True, False)}),
    "halted": ({"default": [Health.HALTED]}, {"default": (False, False)}),
    "silent": ({"default": [(Health.RUNNING, SILENT)]}, {"default": (False, False)}),
    "stopped": ({"default": [Health.STOPPED]}, {"default": (False, False)}),
    "one-halted-one-running": ({"default": [Health.HALTED, Health.RUNNING]}, {"default": (True, True)}),
    "degraded-and-silent": (
        {"default": [Health.DEGRADED, (Health.RUNNING, SILENT)]},
        {"default": (True, False)},
    ),
    "two-groups-one-down": (
        {"default": [Health.RUNNING], "batch": [Health.HALTED]},
        {"default": (True, True), "batch": (False, False)},
    ),
}


@pytest.fixture(autouse=True)
def two_groups(settings):
    settings.BACKWAVE = {"GROUPS": GROUPS}


def record(pumps: dict[str, list]) -> None:
    store, now = get_store(), timezone.now()
    for group, states in pumps.items():
        for index, state in enumerate(states):
            health, age = state if isinstance(state, tuple) else (state, timedelta(0))
            store.record_pump(
                worker_id=f"host-{index}:{100 + index}:{group}:abc{index}",
                group=group,
                queues=GROUPS[group]["QUEUES"],
                health=health,
                detail="psycopg.OperationalError: password authentication failed for user 'secret-user'",
                started_at=now - age,
                now=now - age,
            )


def command_passes(*arguments: str) -> bool:
    try:
        call_command("backwave_health", *arguments, stdout=io.StringIO())
    except CommandError:
        return False
    return True


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_endpoint_and_backwave_health_agree_on_liveness_and_readiness(client, scenario):
    pumps, expected = SCENARIOS[scenario]
    record(pumps)
    for group, (live, ready) in expected.items():
        for probe, passes in (("live", live), ("ready", ready)):
            response = client.get(f"/backwave/health/{group}/", {"probe": probe})
            assert response.status_code == (200 if passes else 503), (group, probe, response.json())
            assert response.json()["ok"] is passes
            flags = ["--ready"] if probe == "ready" else []
            assert command_passes("--group", group, *flags) is passes, (group, probe)
    everything = client.get("/backwave/health/")
    all_live = all(live for live, _ in expected.values()) and set(expected) == set(GROUPS)
    assert (everything.status_code == 200) is (all_live and command_passes())


def test_the_answer_names_each_groups_state_and_pump_counts_and_never_a_jobs_or_pumps_detail(client):
    record({"default": [Health.RUNNING, Health.DEGRADED], "batch": [Health.RUNNING]})
    response = client.get("/backwave/health/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    body = response.json()
    assert body["probe"] == "live" and body["ok"] is True
    default = body["groups"]["default"]
    assert default["status"] == "degraded" and (default["live"], default["ready"]) == (True, True)
    assert default["pumps"] == {"running": 1, "degraded": 1, "halted": 0, "silent": 0}
    assert 0 <= default["last_beat_seconds"] < 5
    assert body["groups"]["batch"]["status"] == "running"
    text = response.content.decode()
    assert "secret-user" not in text and "host-0" not in text and "payload" not in text


def test_an_unknown_group_is_404_and_an_unknown_probe_400(client):
    assert client.get("/backwave/health/nightly/").status_code == 404
    assert client.get("/backwave/health/nightly/").json()["groups"] == ["batch", "default"]
    assert client.get("/backwave/health/", {"probe": "startup"}).status_code == 400


def test_only_get_and_head_are_answered(client):
    record({"default": [Health.RUNNING]})
    assert client.head("/backwave/health/default/").status_code == 200
    assert client.post("/backwave/health/default/").status_code == 405


def test_a_database_that_cannot_be_read_is_a_503_without_its_error(client, monkeypatch):
    from backwave_django.store.django import DjangoStore

    def broken(self):
        raise DatabaseError("could not connect to server at 10.0.0.7 with password hunter2")

    monkeypatch.setattr(DjangoStore, "list_pumps", broken)
    response = client.get("/backwave/health/")
    assert response.status_code == 503
    assert response.json() == {"probe": "live", "ok": False, "error": "the job database could not be read"}
    assert "hunter2" not in response.content.decode()


@pytest.mark.parametrize(
    ("header", "status"),
    [
        (None, 401),
        ("Bearer wrong-token-0123456789", 401),
        ("Basic s3cret-token-0123456789", 401),
        ("Bearer s3cret-token-0123456789", 200),
        ("bearer s3cret-token-0123456789", 200),
    ],
)
def test_with_a_health_token_only_requests_that_carry_it_are_answered(client, settings, header, status):
    settings.BACKWAVE = {"GROUPS": GROUPS, "HEALTH_TOKEN": "s3cret-token-0123456789"}
    record({"default": [Health.RUNNING], "batch": [Health.RUNNING]})
    headers = {} if header is None else {"Authorization": header}
    response = client.get("/backwave/health/", headers=headers)
    assert response.status_code == status
    if status == 401:
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert "groups" not in response.json()
