"""Async handlers in real Pumps: on the Pump's event loop, bounded by POOL_SIZE together with ordinary
handlers, the ORM through Django's async API in the Attempt's own thread, cancellation as asyncio
cancellation, time limits enforced by the loop."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.contrib.auth.models import Group

from backwave_django import cancel_job
from backwave_django.models import Job, Outcome

from .. import jobs
from .helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def states() -> Counter[str]:
    return Counter(Job.objects.values_list("state", flat=True))


def test_async_and_ordinary_handlers_run_side_by_side_and_store_what_they_return(settings):
    with running(settings, {"g": group(POOL_SIZE=8)}):
        added = jobs.async_add.enqueue_many([{"a": n, "b": 1} for n in range(50)])
        orm = jobs.async_orm.enqueue_many([{"name": "loop"}] * 10)
        plain = jobs.add.enqueue_many([{"a": n, "b": 2} for n in range(50)])
        wait_until(lambda: states() == {"succeeded": 110}, timeout=60)
    assert [Job.objects.get(id=j.id).output for j in added] == [n + 1 for n in range(50)]
    assert [Job.objects.get(id=j.id).output for j in plain] == [n + 2 for n in range(50)]
    assert Group.objects.filter(name__startswith="loop").count() == 10  # each Attempt's write committed
    assert sorted(Job.objects.get(id=j.id).output for j in orm)[-1] <= 10


def test_async_handlers_share_the_pool_bound_with_ordinary_ones(settings):
    jobs.async_peak[0] = 0
    with running(settings, {"g": group(QUEUES=["slow"], POOL_SIZE=5)}):
        jobs.async_sleep.enqueue_many([{"seconds": 0.3}] * 20)
        jobs.sleep.enqueue_many([{"seconds": 0.3}] * 3)
        wait_until(lambda: states() == {"succeeded": 23}, timeout=60)
    assert jobs.async_peak[0] <= 5
    assert jobs.async_peak[0] >= 2, "async handlers ran one at a time"


def test_an_async_failure_is_retried_with_its_exception_class_recorded(settings):
    with running(settings, {"g": group()}):
        job = jobs.async_fails.enqueue()
        wait_until(lambda: Job.objects.get(id=job.id).state == "dead_lettered", timeout=30)
    outcomes = list(Outcome.objects.filter(job=job).order_by("attempt"))
    assert [o.kind for o in outcomes] == ["failed", "failed"]
    assert {o.error_type for o in outcomes} == {"builtins.LookupError"}
    assert "async attempt 2 failed" in Job.objects.get(id=job.id).terminal_cause


def test_an_operator_cancel_reaches_an_async_handler_as_asyncio_cancellation(settings):
    with running(settings, {"g": group(QUEUES=["slow"], HEARTBEAT_INTERVAL=0.1)}):
        job = jobs.async_sleep.enqueue(seconds=60)
        wait_until(lambda: Job.objects.get(id=job.id).state == "leased", timeout=10)
        started = time.monotonic()
        cancel_job(job.id, actor="ops")
        wait_until(lambda: Job.objects.get(id=job.id).state == "cancelled", timeout=10)
    assert time.monotonic() - started < 5
    assert Outcome.objects.get(job=job).kind == "cancelled"


def test_an_async_handler_past_its_time_limit_is_cancelled_by_the_loop_and_fails(settings):
    with running(settings, {"g": group(QUEUES=["slow"], TIMEOUT=0.3)}):
        job = jobs.async_sleep.enqueue(seconds=60)
        wait_until(lambda: Job.objects.get(id=job.id).state == "dead_lettered", timeout=15)
    view = Job.objects.get(id=job.id)
    assert view.terminal_cause == "timed out after 0.3 s"
