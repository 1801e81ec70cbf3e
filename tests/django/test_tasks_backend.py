"""Django's Tasks framework on backwave: ``TASKS`` names BackwaveBackend, ``@task`` functions become jobs.

Where Django's own backend tests (``tests/tasks`` in Django: the immediate and dummy backends) state
expectations that hold for any backend, they are checked here in our words: results' statuses, timestamps,
arguments and attempts; errors with their exception class and a traceback ending in the exception's line;
``takes_context``; validation of queues, priorities and ``run_after``; the three signals and the log lines
Django's own receivers write. What differs because a backwave worker runs the task later (not inside
``enqueue``) is said where it is checked.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone

from backwave_django import registry
from backwave_django.models import Job, Outcome
from backwave_django.tasks import BackwaveBackend, LeaseExpired
from backwave_django.tasks.registration import TaskRegistration
from backwave_django.testing import TestPump

from .. import tasks

pytestmark = pytest.mark.django_db


def run_due(**options: object) -> None:
    TestPump(**options).run_due()  # type: ignore[arg-type]


def test_the_default_backend_is_backwave_and_declares_what_it_supports():
    backend = task_backends["default"]
    assert isinstance(backend, BackwaveBackend) and default_task_backend.alias == "default"
    assert (backend.supports_defer, backend.supports_async_task) == (True, True)
    assert (backend.supports_get_result, backend.supports_priority) == (True, True)


def test_building_a_task_registers_it_under_its_module_path_without_touching_the_database(
    django_assert_num_queries,
):
    registration = registry.get("tests.tasks.add")
    assert isinstance(registration, TaskRegistration)
    assert (registration.queue, registration.is_async) == ("default", False)
    assert registry.get("tests.tasks.async_add").is_async
    with django_assert_num_queries(0):
        tasks.add.using(queue_name="emails", priority=5)


def test_enqueue_returns_a_ready_result_and_writes_a_job_in_the_callers_transaction():
    with transaction.atomic():
        result = tasks.noop_task.enqueue(1, two=3)
        assert Job.objects.filter(id=int(result.id)).exists()

    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert (result.args, result.kwargs, result.attempts) == ([1], {"two": 3}, 0)
    assert result.enqueued_at is not None and result.started_at is None and result.finished_at is None
    assert isinstance(result.id, str) and len(result.id) < 64
    assert result.task == tasks.noop_task and result.backend == "default"
    job = Job.objects.get(id=int(result.id))
    assert (job.wire_name, job.queue, job.state) == ("tests.tasks.noop_task", "default", "scheduled")


def test_a_rolled_back_transaction_takes_its_tasks_with_it():
    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.noop_task.enqueue()
        raise RuntimeError("rolled back")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result.id)


@pytest.mark.parametrize("task", [tasks.noop_task, tasks.noop_task_async], ids=["sync", "async"])
def test_a_task_runs_and_its_result_is_successful_with_timestamps_in_order(task):
    result = task.enqueue(1, two=3)

    run_due()
    result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value is None
    assert result.enqueued_at <= result.started_at <= result.last_attempted_at <= result.finished_at
    assert (result.args, result.kwargs, result.attempts) == ([1], {"two": 3}, 1)
    assert result.worker_ids == ["test-node:0:test"]


def test_return_values_come_back_through_get_result_and_refresh():
    sync, asynchronous, meaning = tasks.add.enqueue(2, 3), tasks.async_add.enqueue(a=4, b=5), None
    meaning = tasks.calculate_meaning_of_life.enqueue()

    run_due()

    assert tasks.add.get_result(sync.id).return_value == 5
    assert default_task_backend.get_result(asynchronous.id).return_value == 9
    meaning.refresh()
    assert meaning.return_value == 42


@pytest.mark.parametrize(
    ("task", "exception", "message"),
    [
        (tasks.failing_task_value_error, ValueError, "This task failed due to ValueError"),
        (tasks.failing_task_system_exit, SystemExit, "This task failed due to SystemExit"),
    ],
)
def test_a_failing_attempt_is_an_error_with_its_class_and_traceback(task, exception, message):
    result = task.using().enqueue()
    Job.objects.filter(id=int(result.id)).update(max_attempts=1)  # its first failure is its last

    run_due()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED and result.is_finished
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    [error] = result.errors
    assert error.exception_class is exception
    assert error.traceback.endswith(f"{exception.__name__}: {message}\n"), error.traceback
    assert result.finished_at is not None and result.finished_at >= result.started_at


def test_a_failed_attempt_is_retried_and_every_attempt_has_its_worker_and_error():
    result = tasks.fail_until.enqueue(succeed_on=3)
    with TestPump() as pump:
        pump.run_due()
        pump.advance(dt.timedelta(minutes=5))
        pump.advance(dt.timedelta(minutes=5))
    result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 3
    assert result.attempts == 3 and len(result.worker_ids) == 3
    assert [e.exception_class for e in result.errors] == [RuntimeError, RuntimeError]
    assert "failing attempt 2" in result.errors[1].traceback


def test_an_expired_lease_is_an_error_naming_lease_expired():
    result = tasks.noop_task.enqueue()
    job = Job.objects.get(id=int(result.id))
    with TestPump(lease_duration=dt.timedelta(seconds=30)) as pump:
        # Another worker claims it and crashes: its lease stays until it lapses and the sweep ends it.
        lease = dt.timedelta(seconds=30)
        pump.store.claim(
            worker_id="crashed:1:g:x", queues=["default"], max_jobs=1, lease_duration=lease, now=pump.now
        )
        result.refresh()
        assert result.status == TaskResultStatus.RUNNING and result.worker_ids == ["crashed:1:g:x"]
        pump.advance(dt.timedelta(minutes=2))
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.errors[0].exception_class is LeaseExpired and job.id == int(result.id)
    assert result.worker_ids == ["crashed:1:g:x", "test-node:0:test"]


def test_a_return_value_that_is_not_json_fails_the_attempt():
    result = tasks.complex_return_value.enqueue()
    Job.objects.filter(id=int(result.id)).update(max_attempts=1)

    run_due()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class.__name__ == "PayloadError"
    assert "must be JSON data" in result.errors[0].traceback


def test_a_complex_exception_keeps_its_repr_in_the_traceback():
    result = tasks.complex_exception.enqueue()
    Job.objects.filter(id=int(result.id)).update(max_attempts=1)

    run_due()
    result.refresh()

    assert result.errors[0].exception_class is ValueError
    assert "This task failed" in result.errors[0].traceback


def test_takes_context_gives_the_result_and_the_attempt_number():
    own_id, attempt = tasks.get_task_id.enqueue(), tasks.attempt_number.enqueue()

    run_due()

    assert default_task_backend.get_result(own_id.id).return_value == own_id.id
    assert default_task_backend.get_result(attempt.id).return_value == 1


def test_run_after_defers_a_task_as_an_aware_datetime_or_a_timedelta():
    start = timezone.now()
    at = tasks.noop_task.using(run_after=start + dt.timedelta(hours=1)).enqueue()
    later = tasks.noop_task.using(run_after=dt.timedelta(hours=2)).enqueue()

    with TestPump(start=start + dt.timedelta(seconds=1)) as pump:
        pump.run_due()
        assert default_task_backend.get_result(at.id).status == TaskResultStatus.READY
        pump.advance(dt.timedelta(minutes=61))
        assert default_task_backend.get_result(at.id).status == TaskResultStatus.SUCCESSFUL
        assert default_task_backend.get_result(later.id).status == TaskResultStatus.READY
        pump.advance(dt.timedelta(hours=1))
    assert default_task_backend.get_result(later.id).status == TaskResultStatus.SUCCESSFUL


def test_a_naive_run_after_is_refused():
    with pytest.raises(InvalidTask, match="aware"):
        tasks.noop_task.using(run_after=dt.datetime(2030, 1, 1))


def test_priority_orders_the_claim_within_a_queue():
    low = tasks.urgent.using(priority=-50).enqueue("low")
    normal = tasks.add.enqueue(1, 1)
    high = tasks.urgent.enqueue("high")  # priority=10 from @task

    with TestPump(max_claim_batch=1, pool_size=1) as pump:
        pump.run_due()
        order = [e.job_id for e in pump.executions]

    assert order == [int(high.id), int(normal.id), int(low.id)]
    assert Job.objects.get(id=int(high.id)).priority == 10


@pytest.mark.parametrize("priority", [-101, 101, 1.5])
def test_a_priority_out_of_django_range_is_refused(priority):
    with pytest.raises(InvalidTask, match="priority"):
        tasks.noop_task.using(priority=priority)


def test_a_queue_outside_queues_is_refused_at_enqueue():
    with pytest.raises(InvalidTask, match="Queue 'nowhere' is not valid for backend"):
        tasks.noop_task.using(queue_name="nowhere").enqueue()


def test_a_queue_name_backwave_cannot_store_is_refused(settings):
    settings.TASKS = {"default": {"BACKEND": "backwave_django.tasks.BackwaveBackend", "QUEUES": []}}
    with pytest.raises(InvalidTask, match="queue name"):
        tasks.noop_task.using(queue_name="has spaces")


def test_an_unknown_or_malformed_id_raises_result_does_not_exist():
    for bad in ["999999", "not-a-number", "-1", "9" * 40, "", "1e3"]:
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(bad)


def test_a_job_that_is_not_a_task_is_no_task_result():
    from .. import jobs

    job = jobs.noop.enqueue()
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(str(job.id))


def test_get_result_through_another_task_is_a_mismatch():
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultMismatch):
        tasks.noop_task.get_result(result.id)


def test_arguments_that_are_not_json_are_refused_at_enqueue_naming_them():
    from backwave_django.codec import PayloadError

    with pytest.raises(PayloadError, match="args"):
        tasks.noop_task.enqueue(object())
    with pytest.raises(PayloadError, match="kwargs"):
        tasks.noop_task.enqueue(x={1, 2})
    assert not Job.objects.exists()


def test_the_three_signals_are_sent_and_djangos_log_lines_written(caplog):
    seen: list[tuple[str, str]] = []

    def receiver(signal_name: str):
        def receive(sender, task_result, **kwargs):
            seen.append((signal_name, task_result.status))

        return receive

    receivers = {name: receiver(name) for name in ("enqueued", "started", "finished")}
    task_enqueued.connect(receivers["enqueued"])
    task_started.connect(receivers["started"])
    task_finished.connect(receivers["finished"])
    try:
        with caplog.at_level("DEBUG", logger="django.tasks"):
            result = tasks.noop_task.enqueue()
            run_due()
    finally:
        task_enqueued.disconnect(receivers["enqueued"])
        task_started.disconnect(receivers["started"])
        task_finished.disconnect(receivers["finished"])

    assert seen == [("enqueued", "READY"), ("started", "RUNNING"), ("finished", "SUCCESSFUL")]
    lines = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert any("enqueued" in line and result.id in line for line in lines)
    assert any("state=RUNNING" in line and result.id in line for line in lines)
    assert any("state=SUCCESSFUL" in line and result.id in line for line in lines)


def test_a_signal_receiver_that_raises_is_logged_and_the_task_still_succeeds(caplog):
    def broken(**kwargs):
        raise RuntimeError("receiver bug")

    task_started.connect(broken)
    try:
        result = tasks.add.enqueue(1, 2)
        run_due()
    finally:
        task_started.disconnect(broken)
    assert default_task_backend.get_result(result.id).return_value == 3
    assert any("receiver bug" in r.getMessage() for r in caplog.records)


def test_a_task_no_worker_knows_is_quarantined_with_a_cause_that_says_how_to_fix_it():
    result = tasks.add.enqueue(1, 2)
    Job.objects.filter(id=int(result.id)).update(wire_name="myapp.elsewhere.not_imported")

    run_due()

    job = Job.objects.get(id=int(result.id))
    assert job.state == "quarantined"
    assert "tasks.py" in job.terminal_cause and "not_imported" in job.terminal_cause
    assert Outcome.objects.get(job=job).kind == "unroutable"


def test_an_async_task_uses_the_orm_through_djangos_async_api():
    result = tasks.async_write.enqueue("written-by-a-task")

    run_due()

    assert default_task_backend.get_result(result.id).return_value == 1


def test_the_manifest_lists_tasks_beside_jobs():
    from backwave_django import manifest

    text = manifest.render(registry)
    assert "tests.tasks.add  default  tests.tasks.add" in text


def test_validate_task_accepts_a_timedelta_run_after_and_a_copy_keeps_its_fields():
    deferred = tasks.noop_task.using(run_after=dt.timedelta(seconds=5))
    assert dataclasses.replace(deferred).run_after == dt.timedelta(seconds=5)


@pytest.mark.parametrize(
    ("params", "check"),
    [
        ({"OPTIONS": {"RETRIES": 3}}, "backwave.E072"),
        ({"OPTIONS": []}, "backwave.E072"),
        ({"OPTIONS": {"MAX_ATTEMPTS": 0}}, "backwave.E073"),
        ({"OPTIONS": {"MAX_ATTEMPTS": True}}, "backwave.E073"),
        ({"QUEUES": ["bad queue"]}, "backwave.E074"),
        ({"OPTIONS": {"TIMEOUT": float("nan")}}, "backwave.E075"),
        ({"OPTIONS": {"TIMEOUT": 10**9}}, "backwave.E075"),
        ({"QUEUES": ["default", "nobody-serves-this"]}, "backwave.W071"),
    ],
)
def test_each_mistake_in_the_backends_settings_has_its_check(settings, params, check):
    settings.TASKS = {"default": {"BACKEND": "backwave_django.tasks.BackwaveBackend", **params}}
    found = [message.id for message in task_backends["default"].check()]
    assert found == [check]


def test_good_settings_pass_the_checks_and_options_apply(settings):
    settings.TASKS = {
        "default": {
            "BACKEND": "backwave_django.tasks.BackwaveBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"MAX_ATTEMPTS": 3, "TIMEOUT": 60},
        }
    }
    assert task_backends["default"].check() == []
    result = tasks.noop_task.enqueue()
    job = Job.objects.get(id=int(result.id))
    assert (job.max_attempts, job.timeout) == (3, dt.timedelta(seconds=60))


def test_after_a_requeue_the_attempts_count_again_from_one():
    result = tasks.attempt_number.enqueue()
    job = Job.objects.get(id=int(result.id))
    with TestPump() as pump:
        pump.store.claim(
            worker_id="crashed:1:g:x",
            queues=["default"],
            max_jobs=1,
            lease_duration=dt.timedelta(seconds=1),
            now=pump.now,
        )
        Job.objects.filter(id=job.id).update(max_attempts=1)
        pump.advance(dt.timedelta(seconds=10))  # its lease lapses at the ceiling: dead-lettered
        assert default_task_backend.get_result(result.id).status == TaskResultStatus.FAILED
        from backwave_django import requeue_job

        requeue_job(job.id, actor="ops")
        pump.run_due()
    again = default_task_backend.get_result(result.id)
    assert again.status == TaskResultStatus.SUCCESSFUL and again.return_value == 1
    assert again.attempts == 1 and again.errors == []


def test_a_task_whose_module_path_a_job_holds_already_is_refused():
    from django.tasks import task

    from backwave_django import job

    def collide() -> None: ...

    collide.__module__, collide.__qualname__ = "tests.collisions", "collide"
    job("tests.collisions.collide")(lambda: None)
    try:
        with pytest.raises(InvalidTask, match="a @job"):
            task()(collide)
    finally:
        registry.unregister("tests.collisions.collide")


def test_queues_left_open_are_checked_per_task_not_by_the_backend(settings):
    settings.TASKS = {"default": {"BACKEND": "backwave_django.tasks.BackwaveBackend", "QUEUES": []}}
    assert task_backends["default"].check() == []
