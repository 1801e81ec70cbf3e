"""``BackwaveBackend``: Django's task backend interface (``django.tasks.backends.base``) over the store.

Enqueueing writes a job in the caller's transaction, like ``JobFunction.enqueue`` (Django 6 has no on-commit
enqueueing: a rolled-back transaction takes its tasks with it, and a committed one makes them runnable at
once). Building a Task (``@task`` at import time) only registers it: nothing touches the database until a task
is enqueued or a result read.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from django.core import checks
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task, TaskResult, TaskResultStatus
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone

from .. import codec, conf
from ..core.names import queue_name_problem, wire_name_problem
from ..core.retry import MAX_ATTEMPTS_LIMIT
from ..registry import MAX_TIMEOUT, registry
from ..store import NewJob, get_store
from .registration import TaskRegistration, registration_for

#: What OPTIONS may hold, with the kind of each value.
OPTION_KEYS = {
    "MAX_ATTEMPTS": "an int from 1 to MAX_ATTEMPTS_LIMIT (default: BACKWAVE['RETRY']['MAX_ATTEMPTS'])",
    "TIMEOUT": "seconds per Attempt, more than 0 and at most 7 days (default: the worker group's TIMEOUT)",
}


class BackwaveBackend(BaseTaskBackend):
    """Every ``@task`` function becomes a job: leases, the fence, retries, time limits, the admin."""

    supports_defer = True  # run_after: an aware datetime, or a timedelta from now
    supports_async_task = True  # async def tasks run on the Pump's event loop
    supports_get_result = True  # from any process, at any time until retention purges the job
    supports_priority = True  # the claim order within a queue

    # -- tasks -----------------------------------------------------------------------------------------

    def validate_task(self, task: Task[Any, Any]) -> None:
        """Django's checks, then ours (queue and wire names a store accepts); a valid task is registered, so
        that a worker that imported it can run it."""
        if isinstance(task.run_after, timedelta):  # Django's own check wants a datetime here
            dataclasses.replace(task, run_after=None)  # runs every other check on the same task
        else:
            super().validate_task(task)
        if problem := queue_name_problem(task.queue_name):
            raise InvalidTask(problem)
        if problem := wire_name_problem(task.module_path):
            raise InvalidTask(f"the task's module path is its wire name, and {problem}")
        self._register(task)

    def _register(self, task: Task[Any, Any]) -> None:
        held = registry.get(task.module_path) if task.module_path in registry else None
        if held is not None and not isinstance(held, TaskRegistration):
            raise InvalidTask(
                f"the task's module path {task.module_path!r} is its wire name, and a @job "
                f"({held.handler_path}) is registered under it already; rename the @job's wire name"
            )
        if held is None:
            registry.register(registration_for(task))  # as @task built it: the first build of it

    def known_task(self, wire_name: str, queue: str, priority: int) -> Task[Any, Any] | None:
        """The Task a stored job was enqueued as (its stored queue and priority), if this process knows it."""
        registration = registry.get(wire_name) if wire_name in registry else None
        if not isinstance(registration, TaskRegistration):
            return None
        return self.task_for(registration.task, queue, priority)

    def task_for(self, task: Task[Any, Any], queue: str, priority: int | None = None) -> Task[Any, Any]:
        """``task`` as enqueued in ``queue`` with ``priority`` (its own when None), for a TaskResult."""
        priority = task.priority if priority is None else priority
        if (task.queue_name, task.priority, task.backend) == (queue, priority, self.alias):
            return task
        try:
            return dataclasses.replace(task, queue_name=queue, priority=priority, backend=self.alias)
        except InvalidTask:  # a queue since removed from QUEUES: the task as declared
            return task

    # -- enqueue ---------------------------------------------------------------------------------------

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        self.validate_task(task)
        registration = registry.get(task.module_path)
        assert isinstance(registration, TaskRegistration)
        settings = conf.get()
        now = timezone.now()
        try:
            payload = codec.encode(registration.bind(tuple(args), kwargs))
        except codec.PayloadError as exc:
            raise codec.PayloadError(f"cannot enqueue task {task.module_path!r}: {exc}") from None
        new = NewJob(
            wire_name=task.module_path,
            payload=payload,
            queue=task.queue_name,
            due_at=_due_at(task.run_after, now),
            max_attempts=self._option("MAX_ATTEMPTS", settings.retry.max_attempts),
            timeout=_timeout(self.options.get("TIMEOUT")),
            priority=task.priority,
        )
        store = get_store(settings.database)
        [done] = store.enqueue([new], now=now, max_payload_bytes=settings.max_payload_bytes)
        result: TaskResult[Any, Any] = TaskResult(
            task=task,
            id=str(done.id),
            status=TaskResultStatus.READY,
            enqueued_at=now,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def _option(self, key: str, default: int) -> int:
        value = self.options.get(key)
        return default if value is None else int(value)

    # -- results ---------------------------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        from .results import read_result

        try:
            job_id = int(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(f"no task result has the id {str(result_id)[:80]!r}") from None
        found = read_result(self, job_id) if 0 < job_id < 2**63 else None
        if found is None:
            raise TaskResultDoesNotExist(
                f"no task result has the id {result_id!r} (no such job, or not a task of this backend)"
            )
        return found

    # -- system checks ---------------------------------------------------------------------------------

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        from .checks import backend_problems

        return backend_problems(self)


def _due_at(run_after: datetime | timedelta | None, now: datetime) -> datetime:
    if run_after is None:
        return now
    if isinstance(run_after, timedelta):
        return now + run_after
    return run_after


def _timeout(seconds: Any) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=float(seconds))


__all__ = ["MAX_ATTEMPTS_LIMIT", "MAX_TIMEOUT", "OPTION_KEYS", "BackwaveBackend"]
