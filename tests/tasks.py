"""The suite's ``@task`` functions (Django 6's Tasks framework, run by backwave_django.tasks.BackwaveBackend).

A worker subprocess of the suite (EXTRA_APPS=tests) imports this module at start-up, as it imports every
installed app's ``tasks.py``."""

from __future__ import annotations

import asyncio

from django.tasks import TaskContext, task


@task()
def noop_task(*args: object, **kwargs: object) -> None:
    return None


@task()
async def noop_task_async(*args: object, **kwargs: object) -> None:
    return None


@task()
def calculate_meaning_of_life() -> int:
    return 42


@task()
def add(a: int, b: int) -> int:
    return a + b


@task()
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task()
def failing_task_value_error() -> None:
    raise ValueError("This task failed due to ValueError")


@task()
def failing_task_system_exit() -> None:
    raise SystemExit("This task failed due to SystemExit")


@task()
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value() -> object:
    return {"value": object()}  # not JSON data: the Attempt fails


@task(takes_context=True)
def get_task_id(context: TaskContext) -> str:
    return context.task_result.id


@task(takes_context=True)
def attempt_number(context: TaskContext) -> int:
    return context.attempt


@task(takes_context=True)
def fail_until(context: TaskContext, succeed_on: int) -> int:
    """Fails every Attempt before ``succeed_on``; returns the Attempt that succeeded."""
    if context.attempt < succeed_on:
        raise RuntimeError(f"failing attempt {context.attempt}")
    return context.attempt


@task()
def sleep_for(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "slept"


@task()
async def async_write(name: str) -> int:
    from django.contrib.auth.models import Group

    await Group.objects.acreate(name=name)
    return await Group.objects.filter(name=name).acount()


@task(priority=10)
def urgent(label: str) -> str:
    return label
