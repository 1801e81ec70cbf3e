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
