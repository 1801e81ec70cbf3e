"""A real Pump on a fake clock, against the in-memory store, handlers run inline: every timer, the poll
gate, the idle flush and the health bookkeeping, step by step and deterministic (no sleeps, no threads, no
database).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django import conf
from backwave_django.core.health import Health
from backwave_django.core.retry import RetryPolicy
from backwave_django.registry import registry
from backwave_django.shell.clock import FakeClock
from backwave_django.shell.pump import Pump
from backwave_django.store.contract import NewJob
from backwave_django.store.memory import MemoryStore, TransientFault

from .. import jobs  # noqa: F401  (registers the tests.* jobs)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class CountingStore(MemoryStore):
    """The memory store, counting the calls a Pump makes and failing the ones it is told to."""

    def __init__(self) -> None:
        super().__init__(faults=self._maybe_fail)
        self.calls: Counter[str] = Counter()
        self.fail: dict[str, list[BaseException]] = {}
        self.down = False  # every operation fails, as when the database is unreachable

    def _maybe_fail(self, operation: str, when: str) -> None:
        if when == "before":
            self.calls[operation] += 1
            if self.down:
                raise TransientFault("the database is unreachable")
            pending = self.fail.get(operation)
            if pending:
                raise pending.pop(0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def memory() -> CountingStore:
    return CountingStore()


def make_pump(memory: MemoryStore, clock: FakeClock, **group: object) -> Pump:
    settings = dataclasses.replace(
        conf.default_group_settings(),
        poll_interval=timedelta(seconds=1),
        heartbeat_interval=timedelta(seconds=20),
        maintenance_interval=timedelta(seconds=5),
        **group,
    )
    pump = Pump(
        settings,
        store=memory,
        registry=registry,
        retry=RetryPolicy(jitter=False),
        clock=clock,
        threads=False,
        hints=False,
    )
    pump.open()
    return pump


def settle(pump: Pump) -> int:
    """Handle every event that is ready now; return how many."""
    handled = 0
    while pump.turn():
        handled += 1
    return handled


def enqueue(
    memory: MemoryStore, count: int, *, at: datetime = T0, wire_name: str = "tests.noop"
) -> list[int]:
    news = [
        NewJob(wire_name=wire_name, payload="{}", queue="default", due_at=at, max_attempts=3)
        for _ in range(count)
    ]
    return [job.id for job in memory.enqueue(news, now=at, max_payload_bytes=65536)]


def states(memory: MemoryStore) -> Counter[str]:
    return Counter(job.state.value for job in memory.all_jobs())


def test_the_first_poll_claims_runs_and_reports_in_one_batch(memory, clock):
    enqueue(memory, 10)
    pump = make_pump(memory, clock)
    settle(pump)
    assert states(memory) == {"succeeded": 10}
    assert memory.calls["report"] == 1  # the drain tail flushed all ten at once
    # the claim that found them came back short (ten of twenty), so nothing more waited: the report that
    # applied them, which opened nothing, looks no further
    assert memory.calls["claim"] == 1


def test_nothing_is_claimed_between_poll_ticks(memory, clock):
    pump = make_pump(memory, clock)
    settle(pump)
    enqueue(memory, 1, at=T0)
    clock.advance(0.5)
    settle(pump)
    assert states(memory) == {"scheduled": 1}
    clock.advance(0.5)
    settle(pump)
    assert states(memory) == {"succeeded": 1}


def test_a_burst_of_hints_collapses_into_one_poll(memory, clock):
    pump = make_pump(memory, clock)
    settle(pump)
    claims = memory.calls["claim"]
    enqueue(memory, 3)
    for _ in range(50):
        pump.request_poll()
    settle(pump)
    assert memory.calls["claim"] - claims == 1  # the burst's one poll (its claim came back short)
    assert states(memory) == {"succeeded": 3}


def test_heartbeats_and_the_pump_status_follow_the_heartbeat_interval(memory, clock):
    pump = make_pump(memory, clock)
    settle(pump)
    [status] = memory.list_pumps()
    assert (status.health, status.last_beat_at) == (Health.RUNNING, T0)
    clock.advance(20)
    settle(pump)
    assert memory.list_pumps()[0].last_beat_at == T0 + timedelta(seconds=20)


def test_lapsed_leases_are_swept_on_the_maintenance_tick(memory, clock):
    [job_id] = enqueue(memory, 1)
    memory.claim(
        worker_id="gone:1:g:x", queues=["default"], max_jobs=1, lease_duration=timedelta(seconds=2), now=T0
    )
    pump = make_pump(memory, clock)
    settle(pump)
    assert memory.get_job(job_id).state.value == "leased"
    clock.advance(5)  # the lease lapsed at 2 s; the sweep runs at 5 s; the retry is due after 2 s of backoff
    settle(pump)
    assert [o.kind.value for o in memory.list_outcomes(job_id)] == ["expired"]
    clock.advance(2)
    settle(pump)
    assert memory.get_job(job_id).state.value == "succeeded"


def test_a_transient_fault_degrades_the_pump_backs_off_and_a_good_round_trip_restores_it(memory, clock):
    enqueue(memory, 2)
    memory.down = True
    pump = make_pump(memory, clock)
    settle(pump)
    assert pump.health is Health.DEGRADED
    calls = memory.calls.total()
    pump.request_poll()  # within the backoff (0.1 s): no store work at all
    settle(pump)
    assert memory.calls.total() == calls
    clock.advance(1)  # the next poll tick, past the backoff: it tries again, fails again (backoff doubles)
    settle(pump)
    assert memory.calls.total() > calls and pump.health is Health.DEGRADED
    memory.down = False
    clock.advance(1)
    settle(pump)
    assert states(memory) == {"succeeded": 2}
    assert pump.health is Health.RUNNING and memory.list_pumps()[0].health is Health.RUNNING


def test_a_fault_no_retry_can_cure_halts_the_pump_and_records_why(memory, clock):
    memory.fail["claim"] = [RuntimeError("an invariant broke")]
    enqueue(memory, 1)
    pump = make_pump(memory, clock)
    settle(pump)
    assert pump.health is Health.HALTED
    [status] = memory.list_pumps()
    assert status.health is Health.HALTED and "invariant broke" in status.detail
    clock.advance(10)
    assert settle(pump) == 0 or states(memory) == {"scheduled": 1}  # a halted Driver does nothing more
    assert states(memory) == {"scheduled": 1}


def test_a_shutdown_with_nothing_running_stops_at_once_and_records_it(memory, clock):
    pump = make_pump(memory, clock)
    settle(pump)
    pump.shutdown(timedelta(seconds=30))
    settle(pump)
    assert memory.list_pumps()[0].health is Health.STOPPED
    assert pump.health is Health.STOPPED
