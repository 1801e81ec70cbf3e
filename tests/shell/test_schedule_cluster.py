"""Three worker processes serving the same schedules, one of them killed with SIGKILL and restarted: every
tick is minted exactly once across the cluster, none is lost, none is skipped (PostgreSQL)."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count

from backwave_django.models import Job, Schedule

from .test_kill import start_worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("postgres")]

SCHEDULES = {f"every-second-{n}": {"JOB": "tests.tick", "EVERY": 1} for n in range(10)}


def start() -> subprocess.Popen[str]:
    return start_worker(more={"SCHEDULES": SCHEDULES}, PUMPS=2)


def test_three_workers_mint_every_tick_once_through_a_kill_and_a_restart():
    workers = [start() for _ in range(3)]
    outputs = []
    try:
        time.sleep(12)
        workers[0].send_signal(signal.SIGKILL)  # mid-pass, perhaps mid-mint
        outputs.append(workers[0].communicate(timeout=10)[0])
        time.sleep(2)
        workers[0] = start()
        time.sleep(18)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                outputs.append(worker.communicate(timeout=30)[0])
            except subprocess.TimeoutExpired:
                worker.kill()
                outputs.append(worker.communicate()[0])
    connection.close()
    log = "\n".join(outputs)
    assert "Traceback" not in log, log[-4000:]
    doubles = Job.objects.values("schedule", "scheduled_for").annotate(n=Count("id")).filter(n__gt=1)
    assert not doubles.exists()
    total = 0
    for row in Schedule.objects.filter(name__in=SCHEDULES):
        ticks = sorted(Job.objects.filter(schedule=row.name).values_list("scheduled_for", flat=True))
        decided = round((row.cursor - row.created_at) / timedelta(seconds=1))
        expected = [row.created_at + timedelta(seconds=n) for n in range(1, decided + 1)]
        assert (ticks, row.skipped_count) == (expected, 0), row.name  # every tick, once, in order; none lost
        total += len(ticks)
    assert total >= 250, total  # a few hundred ticks across the cluster
