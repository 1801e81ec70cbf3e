"""Django's Tasks run by ``backwave_pump`` worker processes, in a project configured only through ``TASKS``
(no BACKWAVE setting: one group, ``default``, with every default), read back from this process with
``get_result``: RUNNING while a worker runs it, SUCCESSFUL with the return value, FAILED with an error per
Attempt; a task killed with its worker runs again and keeps its unique key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.db import connection
from django.tasks import TaskResultStatus, default_task_backend

from backwave_django.models import Job

from .. import tasks
from .helpers import wait_until, worker_database_url

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


#: A short lease, so that a killed worker's task runs again within seconds (the default lease is a minute).
SHORT_LEASE = {
    "GROUPS": {"default": {"QUEUES": ["default"], "LEASE_DURATION": 2, "MAINTENANCE_INTERVAL": 0.2}}
}


def start_worker(*extra: str, settings: dict[str, object] | None = None) -> subprocess.Popen[str]:
    """``backwave_pump`` with no BACKWAVE setting at all (BACKWAVE_JSON={}: every default), unless given."""
    backwave = json.dumps(settings or {})
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "EXTRA_APPS": "tests",
        "BACKWAVE_JSON": backwave,
    }
    command = [sys.executable, str(ROOT / "testproject" / "manage.py"), "backwave_pump", "--group", "default"]
    return subprocess.Popen(
        [*command, *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def result(task_id: str):
    return default_task_backend.get_result(task_id)


def test_workers_run_tasks_and_another_process_reads_their_results():
    sync, asynchronous = tasks.add.enqueue(2, 3), tasks.async_add.enqueue(a=10, b=1)
    context, failing = tasks.attempt_number.enqueue(), tasks.fail_until.enqueue(succeed_on=99)
    Job.objects.filter(id=int(failing.id)).update(max_attempts=2)
    worker = start_worker("--burst", "--burst-horizon", "30")
    output, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, output
    connection.close()

    assert (result(sync.id).status, result(sync.id).return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert result(asynchronous.id).return_value == 11
    assert result(context.id).return_value == 1
    failed = result(failing.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 2
    assert [e.exception_class for e in failed.errors] == [RuntimeError, RuntimeError]
    assert len(set(failed.worker_ids)) == 1 and failed.worker_ids[0].split(":")[2] == "default"


def test_a_running_task_reads_running_from_another_process_and_runs_again_after_its_worker_is_killed():
    running = tasks.sleep_for.enqueue(3.0)
    first = start_worker(settings=SHORT_LEASE)
    try:
        wait_until(lambda: result(running.id).status == TaskResultStatus.RUNNING, timeout=30)
        seen = result(running.id)
        assert seen.started_at is not None and seen.attempts == 1 and seen.finished_at is None
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.communicate(timeout=10)
    connection.close()
    second = start_worker("--burst", "--burst-horizon", "30", settings=SHORT_LEASE)
    output, _ = second.communicate(timeout=180)
    assert second.returncode == 0, output
    done = result(running.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == "slept"
    assert done.attempts == 2 and done.errors[0].exception_class.__name__ == "LeaseExpired"


def test_a_task_given_up_at_its_time_limit_sends_no_success_when_its_thread_returns_later(settings):
    from django.tasks.signals import task_finished

    from .helpers import group, running

    finished: list[str] = []

    def receive(sender, task_result, **kwargs):
        finished.append(task_result.status)

    result = tasks.sleep_for.enqueue(4.0)  # ignores its time limit; returns after 4 s, long past it
    Job.objects.filter(id=int(result.id)).update(max_attempts=1)
    task_finished.connect(receive)
    try:
        with running(settings, {"default": group(TIMEOUT=0.3)}, grace=10):
            wait_until(lambda: default_task_backend.get_result(result.id).status == TaskResultStatus.FAILED)
            time.sleep(2.5)  # its thread returns meanwhile
    finally:
        task_finished.disconnect(receive)
    assert TaskResultStatus.SUCCESSFUL not in finished
    assert Job.objects.get(id=int(result.id)).terminal_cause == "timed out after 0.3 s"
