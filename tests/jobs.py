"""Jobs the test suite registers (wire names start with ``tests.``)."""

from __future__ import annotations

import threading

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


@job("tests.holds-a-transaction", queue="slow", max_attempts=1)
def holds_a_transaction(seconds: float, marker: str, context: JobContext) -> None:
    """Writes a row inside a transaction, then sleeps in it without looking at ``context.cancelled``: only the
    server can stop its commit, which no execute wrapper sees."""
    import time

    from django.contrib.auth.models import Group
    from django.db import transaction

    record(context)
    with transaction.atomic():
        Group.objects.create(name=f"{marker}-{context.job_id}-{context.attempt}")
        time.sleep(seconds)


@job("tests.opens-a-span")
def opens_a_span(name: str, context: JobContext) -> None:
    """Starts a span of its own, as an instrumented library inside a handler would."""
    from opentelemetry import trace

    record(context)
    with trace.get_tracer("tests.handler").start_as_current_span(name):
        pass
