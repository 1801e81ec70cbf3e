"""Jobs the test suite registers (wire names start with ``tests.``)."""

from __future__ import annotations

import threading
from collections.abc import Generator

from backwave_django import JobContext, job

calls: list[tuple[str, int, int]] = []  # (wire name, job id, attempt), appended by every handler here
calls_lock = threading.Lock()


def record(context: JobContext | None) -> None:
    if context is None:  # called directly, not as a job
        return
    with calls_lock:
        calls.append((context.wire_name, context.job_id, context.attempt))


@job("tests.noop")
def noop(context: JobContext) -> None:
    record(context)


@job("tests.add", queue="default", max_attempts=3)
def add(a: int, b: int, context: JobContext) -> int:
    record(context)
    return a + b


@job("tests.fail-until", max_attempts=4)
def fail_until(succeed_on: int, context: JobContext) -> None:
    """Fails every attempt before ``succeed_on``."""
    record(context)
    if context.attempt < succeed_on:
        raise RuntimeError(f"failing attempt {context.attempt}")


@job("tests.always-fails", max_attempts=2)
def always_fails(context: JobContext) -> None:
    record(context)
    raise ValueError("always")


@job("tests.sleep", queue="slow")
def sleep(seconds: float, context: JobContext) -> None:
    """Sleeps, waking early when cancelled (then raises, as a cooperative handler does)."""
    record(context)
    if context.wait_cancelled(seconds):
        context.raise_if_cancelled()


@job("tests.orm-query")
def orm_query(n: int, context: JobContext) -> int:
    """Runs real ORM queries in the Attempt's own connection."""
    from django.contrib.auth.models import User

    record(context)
    return User.objects.filter(id__gte=n).count() + User.objects.count()


@job("tests.raise-mid-transaction")
def raise_mid_transaction(context: JobContext) -> None:
    """Opens a transaction by hand, writes, and raises without finishing it."""
    from django.contrib.auth.models import Group
    from django.db import transaction

    record(context)
    transaction.set_autocommit(False)
    Group.objects.create(name=f"left-open-{context.job_id}-{context.attempt}")
    raise RuntimeError("raised with a transaction open")


disposed: list[tuple[str, int]] = []  # (what, job id) for the scope tests


class Resource:
    def __init__(self, job_id: int) -> None:
        self.job_id = job_id

    def close(self) -> None:
        disposed.append(("resource", self.job_id))


@job("tests.scoped-function")
def scoped_function(fail: bool, context: JobContext) -> None:
    record(context)
    context.scope.callback(disposed.append, ("callback", context.job_id))

    def factory() -> Resource:
        return Resource(context.job_id)

    first = context.scope.resource(factory)
    assert context.scope.resource(factory) is first  # built once per Attempt
    if fail:
        raise RuntimeError("failing after registering clean-ups")


@job("tests.scoped-class")
class ScopedClass:
    """A class job: one instance per Attempt, closed when the Attempt ends."""

    def __init__(self, context: JobContext) -> None:
        self.context = context

    def run(self, value: int) -> int:
        record(self.context)
        return value * 2

    def close(self) -> None:
        disposed.append(("instance", self.context.job_id))


# -- hostile jobs: what a job carries must never stop a worker or cost another job its outcome -------------


class UnprintableError(Exception):
    """An exception whose ``__str__`` itself raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@job("tests.hostile-text", max_attempts=1)
def hostile_text(sku: str, context: JobContext) -> None:
    """Fails with a message built from user input: NUL characters, a lone surrogate, a megabyte of text."""
    record(context)
    raise ValueError(f"unknown sku {sku} \udcff {'x' * 100_000}")


@job("tests.unprintable", max_attempts=2)
def unprintable(context: JobContext) -> None:
    record(context)
    raise UnprintableError()


@job("tests.raises-base-exception", max_attempts=1)
def raises_base_exception(kind: str, context: JobContext) -> None:
    """Raises what ``except Exception`` does not catch."""
    record(context)
    if kind == "exit":
        raise SystemExit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    raise GeneratorExit


class Awaitable:
    """Not a coroutine, but awaitable: it has ``__await__``."""

    def __await__(self) -> Generator[None]:
        yield


async def _later() -> None:
    raise AssertionError("a coroutine returned by a synchronous handler must never run")


@job("tests.returns-an-awaitable", max_attempts=1)
def returns_an_awaitable(kind: str, context: JobContext) -> object:
    """A synchronous handler whose result would need awaiting: its work never ran."""
    record(context)
    return _later() if kind == "coroutine" else Awaitable()


@job("tests.ignores-cancellation", queue="slow", max_attempts=1)
def ignores_cancellation(seconds: float, marker: str, context: JobContext) -> None:
    """Sleeps without looking at ``context.cancelled``, then writes a row: an uncooperative handler."""
    import time

    from django.contrib.auth.models import Group

    record(context)
    time.sleep(seconds)
    Group.objects.create(name=f"{marker}-{context.job_id}-{context.attempt}")


ticks: list[tuple[int, object]] = []  # (job id, context.scheduled_for), appended by the scheduled jobs here


@job("tests.tick")
def tick(context: JobContext) -> None:
    """A scheduled job: records the tick it was minted for."""
    record(context)
    with calls_lock:
        ticks.append((context.job_id, context.scheduled_for))


on_commit_ran: list[int] = []  # job ids whose transaction.on_commit callbacks ran


@job("tests.holds-a-transaction", queue="slow", max_attempts=1)
def holds_a_transaction(seconds: float, marker: str, context: JobContext) -> None:
    """Writes a row inside a transaction (with an ``on_commit`` callback), then sleeps in it without looking
    at ``context.cancelled``, and leaves ``atomic()``, whose commit no execute wrapper sees."""
    import time

    from django.contrib.auth.models import Group
    from django.db import transaction

    record(context)
    with transaction.atomic():
        Group.objects.create(name=f"{marker}-{context.job_id}-{context.attempt}")
        transaction.on_commit(lambda: on_commit_ran.append(context.job_id))
        time.sleep(seconds)


# -- return values and async handlers ------------------------------------------------------------------------


@job("tests.returns")
def returns(value: object, context: JobContext) -> object:
    """Returns its argument: a return value to store."""
    record(context)
    return value


class Unstorable:
    """A return value no codec can store."""


@job("tests.returns-unstorable", max_attempts=1)
def returns_unstorable(context: JobContext) -> object:
    record(context)
    return {"fine": 1, "not": [Unstorable()]}


@job("tests.returns-big", max_attempts=1)
def returns_big(size: int, context: JobContext) -> str:
    record(context)
    return "x" * size


running_async: list[int] = []  # job ids of the async handlers running now
async_peak = [0]  # the most that ran at once


@job("tests.async-add")
async def async_add(a: int, b: int, context: JobContext) -> int:
    import asyncio

    record(context)
    await asyncio.sleep(0)
    return a + b


@job("tests.async-sleep", queue="slow", max_attempts=1)
async def async_sleep(seconds: float, context: JobContext) -> None:
    """Sleeps on the loop; counts how many run at once."""
    import asyncio

    record(context)
    with calls_lock:
        running_async.append(context.job_id)
        async_peak[0] = max(async_peak[0], len(running_async))
    try:
        await asyncio.sleep(seconds)
    finally:
        with calls_lock:
            running_async.remove(context.job_id)


@job("tests.async-orm")
async def async_orm(name: str, context: JobContext) -> int:
    """Writes and reads through Django's async ORM API, in the Attempt's own thread and connection."""
    from django.contrib.auth.models import Group

    record(context)
    await Group.objects.acreate(name=f"{name}-{context.job_id}")
    return await Group.objects.filter(name__startswith=name).acount()


@job("tests.async-fails", max_attempts=2)
async def async_fails(context: JobContext) -> None:
    record(context)
    raise LookupError(f"async attempt {context.attempt} failed")


@job("tests.opens-a-span")
def opens_a_span(name: str, context: JobContext) -> None:
    """Starts a span of its own, as an instrumented library inside a handler would."""
    from opentelemetry import trace

    record(context)
    with trace.get_tracer("tests.handler").start_as_current_span(name):
        pass


@job("tests.tags-itself", max_attempts=2)
def tags_itself(tags: list[str], fail: bool, context: JobContext) -> None:
    """Adds each tag (a "key=value" string becomes a keyed tag) and then fails, if asked to."""
    record(context)
    for tag in tags:
        key, _, value = tag.partition("=")
        context.add_tag((key, value) if value else key)
    if fail:
        raise RuntimeError(f"failed after tagging on attempt {context.attempt}")


@job("tests.reads-parent")
def reads_parent(parent: int, context: JobContext) -> object:
    """Returns what job ``parent`` returned, or the NoOutput message."""
    from backwave_django import NoOutput

    record(context)
    try:
        return context.output_of(parent)
    except NoOutput as exc:
        return f"no output: {exc}"


@job("tests.async-reads-parent")
async def async_reads_parent(parent: int, context: JobContext) -> object:
    record(context)
    return await context.aoutput_of(parent)
