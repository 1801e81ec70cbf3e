"""NO_OVERLAP with a run that is really running: a real Pump on a fake clock, its handler in a worker thread
holding the job's lease while the next ticks come. The ticks are skipped and counted, visibly, and the cadence
resumes once the run has finished."""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django import codec, conf, job
from backwave_django.context import JobContext
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.schedules import Misfire
from backwave_django.core.states import State
from backwave_django.registry import registry
from backwave_django.shell.clock import FakeClock
from backwave_django.shell.pump import Pump
from backwave_django.store.contract import ScheduleDefinition
from backwave_django.store.memory import MemoryStore

pytestmark = pytest.mark.slow  # a real worker thread

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def slow_run():
    """A scheduled job whose first run blocks until the test lets it go; later runs return at once."""
    release, started, runs = threading.Event(), threading.Event(), []

    @job("tests.slow-tick", max_attempts=1)
    def slow_tick(context: JobContext) -> None:
        runs.append(context.scheduled_for)
        if len(runs) == 1:
            started.set()
            assert release.wait(10), "the test never let the slow run finish"

    yield release, started, runs
    release.set()
    registry.unregister("tests.slow-tick")


def every_minute_without_overlap(store: MemoryStore) -> None:
    schedule = ScheduleDefinition(
        name="slow", wire_name="tests.slow-tick", queue="default", payload=codec.encode({}), cron="",
        every=MINUTE, timezone="UTC", misfire=Misfire.SKIP, no_overlap=True, max_attempts=1, timeout=None,
    )  # fmt: skip
    store.sync_schedules([schedule], now=T0)


def settle(pump: Pump, *, handlers_done: bool) -> None:
    """Handle every event that is ready; with ``handlers_done``, also wait for the handlers running in the
    pool to end and handle what they report."""
    deadline = time.monotonic() + 10
    while True:
        if pump.turn():
            continue
        if not (handlers_done and pump.executor.busy) or time.monotonic() > deadline:
            return
        time.sleep(0.001)  # a handler is still running in the pool


def run_for(pump: Pump, clock: FakeClock, span: timedelta, *, handlers_done: bool = True) -> None:
    """Move the fake clock on in maintenance-sized steps, settling at each."""
    for _ in range(int(span / timedelta(seconds=5))):
        clock.advance(5)
        settle(pump, handlers_done=handlers_done)


def test_ticks_while_a_run_holds_its_lease_are_skipped_and_counted_then_the_cadence_resumes(slow_run):
    release, started, runs = slow_run
    store, clock = MemoryStore(), FakeClock(T0)
    every_minute_without_overlap(store)
    settings = dataclasses.replace(
        conf.default_group_settings(),
        poll_interval=timedelta(seconds=1),
        heartbeat_interval=timedelta(seconds=20),
        maintenance_interval=timedelta(seconds=5),
    )
    pump = Pump(settings, store=store, registry=registry, retry=RetryPolicy(), clock=clock, hints=False)
    pump.open()
    try:
        run_for(pump, clock, MINUTE - timedelta(seconds=5))
        clock.advance(5)  # 00:01: the first run is minted, claimed and starts in a worker thread
        settle(pump, handlers_done=False)
        assert started.wait(10)
        [first] = store.all_jobs()
        run_for(pump, clock, 2 * MINUTE, handlers_done=False)  # 00:02 and 00:03 come while it runs
        assert store.get_job(first.id).state is State.LEASED  # its heartbeats kept the lease
        assert [j.scheduled_for for j in store.all_jobs()] == [T0 + MINUTE]
        [view] = store.list_schedules()
        assert (view.skipped_count, view.recent_skips) == (2, (T0 + 2 * MINUTE, T0 + 3 * MINUTE))

        release.set()  # the slow run ends; its outcome is reported
        settle(pump, handlers_done=True)
        assert store.get_job(first.id).state is State.SUCCEEDED

        run_for(pump, clock, 2 * MINUTE)  # 00:04 and 00:05: on the cadence again
    finally:
        release.set()
        pump.shutdown(timedelta(seconds=1))
        settle(pump, handlers_done=True)
        pump.close()
    assert runs == [T0 + MINUTE, T0 + 4 * MINUTE, T0 + 5 * MINUTE]
    assert store.list_schedules()[0].skipped_count == 2
