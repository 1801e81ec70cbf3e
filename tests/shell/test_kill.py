"""kill -9 in the middle of long jobs: another worker process finishes them once the leases lapse."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from backwave_django.models import Job, Lease, Outcome

from .. import jobs
from .helpers import wait_until, worker_database_url

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def worker_env(more: dict[str, object] | None = None, **group: object) -> dict[str, str]:
    """Environment for a ``backwave_pump`` process that uses this test's database and the tests' jobs;
    ``more``: other BACKWAVE keys."""
    settings = {
        **(more or {}),
        "GROUPS": {
            "default": {
                "QUEUES": ["default"],
                "POOL_SIZE": 4,
                "POLL_INTERVAL": 0.1,
                "LEASE_DURATION": 2,
                "MAINTENANCE_INTERVAL": 0.2,
                **group,
            }
        },
    }
    return {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "EXTRA_APPS": "tests",
        "BACKWAVE_JSON": json.dumps(settings),
    }


def start_worker(
    *extra: str, more: dict[str, object] | None = None, **group: object
) -> subprocess.Popen[str]:
    command = [sys.executable, str(ROOT / "testproject" / "manage.py"), "backwave_pump", *extra]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=worker_env(more, **group),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_jobs_of_a_killed_worker_are_finished_by_another_after_their_leases_lapse():
    keyed = jobs.sleep.using(queue="default", unique_key="crash-key")
    created = [
        *jobs.sleep.using(queue="default").enqueue_many([{"seconds": 1.0}] * 3),
        keyed.enqueue(seconds=1.0),
    ]
    first = start_worker()
    try:
        wait_until(lambda: Lease.objects.count() == 4, timeout=30)
        owners = set(Lease.objects.values_list("owner", flat=True))
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.communicate(timeout=10)  # reaps it and closes its pipe
    again = keyed.enqueue(seconds=1.0)  # the killed Attempt's job still holds its key
    assert again.duplicate and again.id == created[-1].id
    connection.close()
    second = start_worker("--burst", "--burst-horizon", "10")
    output, _ = second.communicate(timeout=60)
    assert second.returncode == 0, output
    assert Counter(Job.objects.values_list("state", flat=True)) == {"succeeded": 4}, output
    assert Job.objects.get(id=created[-1].id).unique_key == "crash-key"  # kept through the retry
    assert not keyed.enqueue(seconds=1.0).duplicate  # and freed once it succeeded
    for job in created:
        trail = list(
            Outcome.objects.filter(job_id=job.id).order_by("attempt").values_list("attempt", "kind", "worker")
        )
        assert [(a, k) for a, k, _ in trail] == [(1, "expired"), (2, "succeeded")]
        assert trail[0][2] in owners and trail[1][2] not in owners
        assert Job.objects.get(id=job.id).attempt == 2


def test_sigterm_drains_then_releases_what_outlives_the_grace_period():
    short = jobs.sleep.using(queue="default").enqueue(seconds=0.3)
    long = jobs.sleep.using(queue="default").enqueue(seconds=60)
    worker = start_worker(SHUTDOWN_GRACE=1.5, LEASE_DURATION=30)
    try:
        wait_until(lambda: Lease.objects.count() == 2, timeout=30)
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
    finally:
        worker.kill()
    assert worker.returncode == 0, output
    assert "draining" in output
    assert Job.objects.get(id=short.id).state == "succeeded"  # finished within the grace period
    released = Job.objects.get(id=long.id)
    assert (released.state, released.attempt) == ("scheduled", 0)  # back at once, no attempt charged
    assert Outcome.objects.get(job=released).kind == "released"


def test_a_second_signal_exits_at_once():
    jobs.sleep.using(queue="default").enqueue(seconds=60)
    worker = start_worker(SHUTDOWN_GRACE=120, LEASE_DURATION=30)
    try:
        wait_until(lambda: Lease.objects.count() == 1, timeout=30)
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the first signal starts a 120 s drain; the second must not wait for it
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=10)
    finally:
        worker.kill()
    assert worker.returncode == 1, output
    assert "exiting at once" in output


def test_sigterm_ends_the_process_soon_after_the_grace_even_when_handlers_ignore_it():
    """Three handlers sleep 8 s, ignoring every request to stop, then write a row. With a 1 s grace the
    process is gone within a few seconds, their jobs are back in the queue uncharged, and no row is ever
    written: a handler never outlives the lease it ran under."""
    created = jobs.ignores_cancellation.using(queue="default").enqueue_many(
        [{"seconds": 8, "marker": "outlived"}] * 3
    )
    worker = start_worker(SHUTDOWN_GRACE=1, LEASE_DURATION=30)
    try:
        wait_until(lambda: Lease.objects.count() == 3, timeout=30)
        signalled = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
        took = time.monotonic() - signalled
    finally:
        worker.kill()
    assert took < 1 + 2 + 3, output  # the grace, the stop window, and the writes
    assert "did not stop; ending the process" in output
    for job in created:
        job.refresh_from_db()
        assert (job.state, job.attempt) == ("scheduled", 0), output
        assert list(Outcome.objects.filter(job=job).values_list("kind", flat=True)) == ["released"]
    from django.contrib.auth.models import Group

    time.sleep(max(0.0, 9 - took))  # when the handlers would have written, had they lived
    assert not Group.objects.filter(name__startswith="outlived-").exists()
