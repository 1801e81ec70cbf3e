"""How a ``@task`` function becomes a job: its registration under its module path, its arguments stored
as ``{"args": [...], "kwargs": {...}}``, and the signals and context Django's Tasks framework promises around
each Attempt.

A task is registered when Django builds it (``@task`` at import time calls the backend's
``validate_task``), so a worker knows every task of the modules it imports: each installed app's ``jobs.py``
and ``tasks.py`` (``apps.py``). A stored module path is never imported by a worker: a task it does not
know is quarantined.

Around each Attempt the worker sends ``task_started`` and ``task_finished`` with a ``TaskResult`` as it stands
then, and a task that ``takes_context`` receives a ``TaskContext`` whose ``attempt`` is the Attempt's number.
For a first Attempt that result is built from what the claim returned; for a later one the job's history is
read from the store (in the Attempt's own thread and connection), so its workers and errors are all there.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.tasks.base import Task, TaskContext, TaskError, TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from .. import codec
from ..context import JobContext
from ..core.text import describe, format_traceback
from ..registry import JobRegistration
from ..shell.scope import class_path

if TYPE_CHECKING:
    from .backend import BackwaveBackend

logger = logging.getLogger("backwave.tasks")


def plain(value: Any, what: str) -> Any:
    """``value`` as Django's Tasks store it (``normalize_json``: tuples become lists, and so on), or
    PayloadError naming ``what`` when it is not JSON data."""
    try:
        return normalize_json(value)
    except (TypeError, ValueError) as exc:
        raise codec.PayloadError(f"{what} must be JSON data (Django's Tasks store JSON): {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRegistration(JobRegistration):
    """A job registration for a Django ``Task``: called with positional and keyword arguments."""

    task: Task[Any, Any] = field(repr=False)  # the Task as @task built it (its queue, priority and backend)

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The payload: the arguments as Django stores them, checked against the function's signature."""
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.wire_name!r} ({self.handler_path}{self.signature}): {exc}") from None
        return {"args": plain(list(args), "args"), "kwargs": plain(dict(kwargs), "kwargs")}

    def decode(self, payload: str) -> dict[str, Any]:
        arguments = codec.decode(payload)
        args, kwargs = arguments.get("args"), arguments.get("kwargs")
        if set(arguments) != {"args", "kwargs"} or not isinstance(args, list) or not isinstance(kwargs, dict):
            raise codec.PayloadDecodeError("payload is not a task's {'args': [...], 'kwargs': {...}}")
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            message = f"payload does not fit {self.handler_path}{self.signature}: {exc}"
            raise codec.PayloadDecodeError(message) from None
        return arguments

    def execute(self, arguments: Mapping[str, Any], context: JobContext) -> Any:
        if self.is_async:
            return self._run_async(arguments, context)
        result = running_result(self, arguments, context)
        try:
            value = self.target(*self._args(result, arguments), **arguments["kwargs"])
        except BaseException as exc:
            self._failed(result, exc, context)  # inside the except, as Django does: its log has the traceback
            raise
        return self._finished(result, value, context)

    async def _run_async(self, arguments: Mapping[str, Any], context: JobContext) -> Any:
        """The same for an ``async def`` task; the signals' receivers run in the Attempt's own thread."""
        result = await sync_to_async(running_result)(self, arguments, context)
        try:
            value = await self.target(*self._args(result, arguments), **arguments["kwargs"])
        except BaseException as exc:
            await sync_to_async(self._failed)(result, exc, context)
            raise
        return await sync_to_async(self._finished)(result, value, context)

    def _args(self, result: TaskResult[Any, Any], arguments: Mapping[str, Any]) -> list[Any]:
        args = list(arguments["args"])
        return [TaskContext(task_result=result), *args] if self.task.takes_context else args

    def _failed(self, result: TaskResult[Any, Any], exc: BaseException, context: JobContext) -> None:
        if context.given_up:  # its outcome was decided without it (the Driver's time limit, say)
            return
        error = TaskError(exception_class_path=class_path(exc), traceback=format_traceback(exc))
        errors = [*result.errors, error]
        _send(task_finished, _ended(result, TaskResultStatus.FAILED, errors=errors))

    def _finished(self, result: TaskResult[Any, Any], value: Any, context: JobContext) -> Any:
        """The return value as Django's Tasks keep it; one that is not JSON data fails the Attempt."""
        try:
            value = plain(value, "a task's return value")
        except codec.PayloadError as exc:
            self._failed(result, exc, context)
            raise
        if not context.given_up:
            ended = _ended(result, TaskResultStatus.SUCCESSFUL)
            object.__setattr__(ended, "_return_value", value)
            _send(task_finished, ended)
        return value


def registration_for(task: Task[Any, Any]) -> TaskRegistration:
    func = task.func
    signature = inspect.signature(func)
    if task.takes_context:  # Django passes the context first, as ``context``
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return TaskRegistration(
        wire_name=task.module_path,
        queue=task.queue_name,
        max_attempts=None,
        timeout=None,
        target=func,
        is_class=False,
        signature=signature,
        context_parameter=None,
        priority=task.priority,
        is_async=inspect.iscoroutinefunction(func),
        task=task,
    )


def running_result(
    registration: TaskRegistration, arguments: Mapping[str, Any], context: JobContext
) -> TaskResult[Any, Any]:
    """The task's result as this Attempt begins (RUNNING), which ``task_started`` is sent with."""
    from .results import read_result

    now = timezone.now()
    backend: BackwaveBackend = registration.task.get_backend()  # type: ignore[assignment]
    if context.attempt > 1:  # earlier Attempts' workers and errors are in the store
        result = read_result(backend, context.job_id)
        if result is not None:
            _send(task_started, result)
            return result
    result = TaskResult(
        task=backend.task_for(registration.task, context.queue),
        id=str(context.job_id),
        status=TaskResultStatus.RUNNING,
        enqueued_at=context.enqueued_at,
        started_at=now,
        last_attempted_at=now,
        finished_at=None,
        args=arguments["args"],
        kwargs=arguments["kwargs"],
        backend=backend.alias,
        errors=[],
        worker_ids=[context.worker_id],
    )
    _send(task_started, result)
    return result


def _ended(result: TaskResult[Any, Any], status: TaskResultStatus, **changes: Any) -> TaskResult[Any, Any]:
    return replace(result, status=status, finished_at=timezone.now(), **changes)


def _send(signal: Any, result: TaskResult[Any, Any]) -> None:
    """Send a Tasks signal; a receiver that raises is logged and never ends the Attempt or the Pump."""
    sent = signal.send_robust(sender=type(result.task.get_backend()), task_result=result)
    for receiver, error in sent:
        if isinstance(error, Exception):
            logger.error("a django.tasks signal receiver (%r) raised: %s", receiver, describe(error))
