"""The observable gauges: queue depth and leased jobs per queue, and the health of this process's Pumps.

A metric reader collects gauges whenever it likes (every minute, or on every scrape), so their reads are
bounded: the Pumps of this process are watched in memory (no query), and each database's depths are read at
most once every :data:`REFRESH_SECONDS`, with counts bounded at :data:`DEPTH_BOUND` like the admin's (an index
scan that stops there: ``10000`` means "at least that many"), for the queues the Pumps of this process serve.
Every worker process reports the same depths for the queues they share: aggregate them with max, not sum.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..core.health import Health
from . import names as n

if TYPE_CHECKING:
    from ..shell.runner import CommandRunner

logger = logging.getLogger("backwave.telemetry")

#: The admin's bound on a queue's depth (``admin/queue_rows.py``; a test keeps them equal).
DEPTH_BOUND = 10_000
#: The depths of a database are read at most this often; collections in between get the last reading.
REFRESH_SECONDS = 15.0

_runners: weakref.WeakSet[CommandRunner] = weakref.WeakSet()
_lock = threading.Lock()
#: Per database alias: when it was read (monotonic), and per queue (scheduled, leased).
_readings: dict[str, tuple[float, dict[str, tuple[int, int]]]] = {}


def watch(runner: CommandRunner) -> None:
    """A Pump's runner is at work in this process: report its health, and the depth of its queues."""
    _runners.add(runner)


def create(meter: Meter) -> None:
    bounded = f"counted up to {DEPTH_BOUND}"
    meter.create_observable_gauge(
        n.QUEUE_DEPTH, [_depth], unit="{job}", description=f"Scheduled jobs per queue, {bounded}."
    )
    meter.create_observable_gauge(
        n.QUEUE_LEASED, [_leased], unit="{job}", description=f"Leased jobs per queue, {bounded}."
    )
    meter.create_observable_gauge(
        n.PUMPS, [_pumps], unit="{pump}", description="This process's Pumps, by worker group and health."
    )


def _pumps(options: CallbackOptions) -> Iterable[Observation]:
    runners = list(_runners)
    counts = Counter((runner.group, runner.health) for runner in runners)
    for group in sorted({runner.group for runner in runners}):
        for health in Health:  # every state, so that a state the Pumps left reads 0, not its last value
            attributes = {n.MESSAGING_SYSTEM: n.SYSTEM, n.CONSUMER_GROUP: group, n.HEALTH: health.value}
            yield Observation(counts[group, health], attributes)


def _depth(options: CallbackOptions) -> Iterable[Observation]:
    return _observe(0)


def _leased(options: CallbackOptions) -> Iterable[Observation]:
    return _observe(1)


def _observe(column: int) -> Iterable[Observation]:
    for queue, counts in sorted(queue_counts().items()):
        yield Observation(counts[column], {n.MESSAGING_SYSTEM: n.SYSTEM, n.DESTINATION: queue})


def served() -> dict[str, set[str]]:
    """The queues the watched Pumps serve, by database alias (stores without one are not read)."""
    from django.db import connections

    found: dict[str, set[str]] = {}
    for runner in list(_runners):
        if runner.health in (Health.STOPPED, Health.HALTED):
            continue  # a Pump that has ended
        alias = getattr(runner.store, "using", None)
        if isinstance(alias, str) and alias in connections.settings:
            found.setdefault(alias, set()).update(runner.queues)
    return found


def queue_counts() -> dict[str, tuple[int, int]]:
    """(scheduled, leased) per served queue, from readings at most :data:`REFRESH_SECONDS` old."""
    found: dict[str, tuple[int, int]] = {}
    for alias, queues in served().items():
        with _lock:
            read_at, counts = _readings.get(alias, (float("-inf"), {}))
            if time.monotonic() - read_at >= REFRESH_SECONDS or not queues <= set(counts):
                counts = _read(alias, sorted(queues), counts)
                _readings[alias] = (time.monotonic(), counts)
        found.update({queue: counts[queue] for queue in queues if queue in counts})
    return found


def _read(alias: str, queues: list[str], last: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """Two bounded index scans per queue. A database that cannot be read keeps the last reading."""
    from django.db import DatabaseError, connections

    from ..models import Job, Lease

    try:
        jobs, leases = Job.objects.using(alias), Lease.objects.using(alias)
        counts = {
            queue: (
                jobs.filter(queue=queue, state="scheduled").order_by()[:DEPTH_BOUND].count(),
                leases.filter(queue=queue).order_by()[:DEPTH_BOUND].count(),
            )
            for queue in queues
        }
    except DatabaseError as exc:
        logger.warning("could not read the queue depths of %r for the metrics: %s", alias, exc)
        return last
    finally:
        connection = connections[alias]
        if not connection.in_atomic_block:  # the reader's own thread: leave no connection open
            connection.close()
    return counts
