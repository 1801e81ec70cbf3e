"""Metrics through the OpenTelemetry API: counters and histograms as things happen, gauges read at a bounded
cost."""

from __future__ import annotations

import gc
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from backwave_django.admin.queue_rows import DEPTH_BOUND as ADMIN_DEPTH_BOUND
from backwave_django.telemetry import gauges
from backwave_django.telemetry import names as n

from .. import jobs
from ..shell.helpers import group, running, wait_until


def totals(points, key: str) -> Counter:
    """Sum of the points' values (histograms: their counts) by the attribute ``key``."""
    found: Counter = Counter()
    for point in points:
        found[point.attributes.get(key)] += getattr(point, "count", None) or getattr(point, "value", 0)
    return found


@pytest.fixture(autouse=True)
def fresh_readings():
    gc.collect()  # runners of earlier tests' nodes leave the watched set
    gauges._readings.clear()
    yield
    gauges._readings.clear()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_enqueues_claims_attempts_durations_and_pickup_latency_are_counted(otel, settings):
    jobs.noop.enqueue_many([{}] * 3)
    jobs.always_fails.using(queue="emails").enqueue()
    queues = {"QUEUES": ["default", "emails"]}
    with running(settings, {"g": group(**queues)}) as node:
        wait_until(lambda: node.pumps[0].processed == 5, timeout=15)
    collected = otel.collect()
    assert totals(collected[n.ENQUEUED], n.DESTINATION) == {"default": 3, "emails": 1}
    assert totals(collected[n.CLAIMED], n.DESTINATION) == {"default": 3, "emails": 2}
    assert totals(collected[n.ATTEMPTS], n.OUTCOME) == {"succeeded": 3, "failed": 2}
    assert totals(collected[n.ATTEMPT_DURATION], n.OUTCOME) == {"succeeded": 3, "failed": 2}
    assert totals(collected[n.PICKUP_LATENCY], n.DESTINATION) == {"default": 3, "emails": 2}
    [failure] = [p for p in collected[n.ATTEMPT_DURATION] if p.attributes[n.OUTCOME] == "failed"]
    assert failure.attributes[n.ERROR_TYPE] == "ValueError"


def ours(point) -> bool:
    """A point of this test's group or queue (runners of earlier tests may linger until collected)."""
    return (
        point.attributes.get(n.CONSUMER_GROUP, "g") == "g"
        and point.attributes.get(n.DESTINATION, "default") == "default"
    )


def ready(collected):
    """Both Pumps watched (each obeyed a command) and the sleeping job leased: the collection, else None."""
    pumps = {p.attributes[n.HEALTH]: p.value for p in collected.get(n.PUMPS, [])}
    leased = sum(p.value for p in collected.get(n.QUEUE_LEASED, []))
    gauges._readings.clear()
    return collected if pumps.get("running") == 2 and leased == 1 else None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_gauges_give_depth_leased_and_pump_health_per_queue_and_group(otel, settings):
    jobs.noop.using(run_after=timedelta(hours=1)).enqueue_many([{}] * 4)
    jobs.sleep.using(queue="default").enqueue(seconds=1.0)
    with running(settings, {"g": group(PUMPS=2)}):
        collected = wait_until(lambda: ready(otel.collect()), timeout=5)
    depth = {p.attributes[n.DESTINATION]: p.value for p in collected[n.QUEUE_DEPTH] if ours(p)}
    leased = {p.attributes[n.DESTINATION]: p.value for p in collected[n.QUEUE_LEASED] if ours(p)}
    pumps = {p.attributes[n.HEALTH]: p.value for p in collected[n.PUMPS] if ours(p)}
    assert depth == {"default": 4}
    assert leased == {"default": 1}
    assert (pumps["running"], pumps["degraded"], pumps["halted"]) == (2, 0, 0)


@pytest.mark.django_db
def test_queue_depths_are_bounded_like_the_admins_and_read_at_most_once_per_refresh(
    monkeypatch, django_assert_num_queries
):
    assert gauges.DEPTH_BOUND == ADMIN_DEPTH_BOUND
    jobs.noop.using(run_after=timezone.now() + timedelta(hours=1)).enqueue_many([{}] * 5)

    class Runner:  # what the gauges read of a Pump's command runner
        store = type("Store", (), {"using": "default"})()
        queues = ("default",)
        group, health = "g", "running"

    runner = Runner()
    monkeypatch.setattr(gauges, "_runners", {runner})
    monkeypatch.setattr(gauges, "DEPTH_BOUND", 3)
    with django_assert_num_queries(2):
        assert gauges.queue_counts() == {"default": (3, 0)}
    with django_assert_num_queries(0):  # within REFRESH_SECONDS: the last reading
        assert gauges.queue_counts() == {"default": (3, 0)}
    monkeypatch.setattr(gauges, "REFRESH_SECONDS", 0.0)
    with django_assert_num_queries(2):
        gauges.queue_counts()
