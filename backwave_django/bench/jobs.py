"""The benchmark's jobs, registered only when a benchmark runs (never by importing the package)."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

from ..context import JobContext
from ..registry import JobFunction, job, registry

_print_lock = threading.Lock()


def _noop() -> None:
    """Does nothing: the framework's overhead is all that is measured."""


def _sleep(ms: float) -> None:
    time.sleep(ms / 1000)


async def _async_sleep(ms: float) -> None:
    import asyncio

    await asyncio.sleep(ms / 1000)


def _stamp(context: JobContext) -> None:
    """Prints when the handler started, for the pickup latency (the bench reads the worker's stdout)."""
    say(f"BWSTART {context.job_id} {time.time():.6f}")


def say(line: str) -> None:
    """One line to the bench, whole, from any thread."""
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@dataclass(frozen=True, slots=True)
class BenchJobs:
    noop: JobFunction[[], None]
    sleep: JobFunction[[float], None]
    async_sleep: JobFunction[..., object]
    stamp: JobFunction[..., None]  # its context is passed by the worker, never at enqueue


def register() -> BenchJobs:
    """Register the four jobs (once per process) and return them."""
    if "backwave.bench.noop" in registry:
        return BenchJobs(
            noop=JobFunction(registry.get("backwave.bench.noop")),
            sleep=JobFunction(registry.get("backwave.bench.sleep")),
            async_sleep=JobFunction(registry.get("backwave.bench.async-sleep")),
            stamp=JobFunction(registry.get("backwave.bench.stamp")),
        )
    return BenchJobs(
        noop=job("backwave.bench.noop")(_noop),
        sleep=job("backwave.bench.sleep")(_sleep),
        async_sleep=job("backwave.bench.async-sleep")(_async_sleep),
        stamp=job("backwave.bench.stamp")(_stamp),
    )
