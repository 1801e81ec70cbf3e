"""The Pump's health: transient store faults (degraded, with a backoff), faults no retry cures (halted), and
abandoned handler threads (degraded, and slots lost)."""

from __future__ import annotations

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core.driver import STORE_BACKOFF_MAX, STORE_BACKOFF_MIN
from backwave_django.core.health import Health

from .helpers import (
    EVERY_EVENT,
    REPOLL,
    RUNNING,
    beat_done,
    beat_due,
    claim,
    claimed,
    degraded,
    driver,
    execute,
    expired,
    fatal,
    fault,
    heartbeat,
    idle,
    load,
    maintenance,
    ok,
    poll,
    renewed,
    report,
    reported,
    run,
    scenario,
    secs,
    signal,
    status,
    succeeded,
    sweep,
    threads,
    wake,
)

FATAL = "ProgrammingError: relation does not exist"
HALTED = [status(Health.HALTED, FATAL), cmd.Halt(reason=FATAL)]
TWO_THREADS = "2 abandoned handler thread(s) still running"
TWO_THREADS_ONE_SLOT = "2 abandoned handler thread(s) still running; 1 pool slot(s) lost until they end"
MIN = STORE_BACKOFF_MIN.total_seconds()

# -- transient store faults -------------------------------------------------------------------------------

DEGRADED = [
    scenario("a transient store fault degrades the pump and records why", [(fault(), [degraded()])]),
    scenario(
        "a repeated fault with the same detail records nothing new",
        [(fault(), [degraded()]), (fault(), [])],
    ),
    scenario(
        "a fault with a new detail is recorded",
        [(fault("OperationalError: a"), [degraded("OperationalError: a")]), (fault("b"), [degraded("b")])],
    ),
    scenario(
        "while the store backs off, a poll does nothing, then claims once the backoff has passed",
        [(fault(), [degraded()]), (poll(s=MIN / 2), []), (poll(s=MIN), [claim(3)])],
    ),
    scenario(
        "while the store backs off, idle writes nothing, then flushes once the backoff has passed",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (fault(), [degraded()]),
            (idle(s=MIN / 2), []),
            (idle(s=MIN), [report(ok(1)), claim(2)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "while the store backs off, maintenance does nothing, then sweeps once the backoff has passed",
        [(fault(), [degraded()]), (maintenance(s=MIN / 2), []), (maintenance(s=MIN), [sweep(), load()])],
    ),
    scenario(
        "while the store backs off, a heartbeat records the degraded status and still renews leases",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (fault(), [degraded()]),
            (beat_due(s=MIN / 2), [degraded(), heartbeat(1)]),
        ],
    ),
    scenario(
        "a job that ends during the backoff is written once the backoff has passed, not before",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (fault(), [degraded()]),
            (succeeded(1, s=MIN / 2), []),
            (idle(s=MIN), [report(ok(1)), claim(3)]),
        ],
    ),
]


@pytest.mark.parametrize(("dials", "script"), DEGRADED)
def test_a_transient_store_fault_degrades_the_pump_and_backs_off(dials, script):
    run(driver(**dials), script)


BACKOFFS = [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.6), (6, 3.2), (7, 5.0), (8, 5.0), (100, 5.0)]


@pytest.mark.parametrize(("faults", "backoff"), BACKOFFS, ids=[f"{n} in a row" for n, _ in BACKOFFS])
def test_the_store_backoff_doubles_per_fault_in_a_row_up_to_its_cap(faults, backoff):
    node = driver()
    for _ in range(faults):
        node.step(fault())
    assert STORE_BACKOFF_MIN.total_seconds() <= backoff <= STORE_BACKOFF_MAX.total_seconds()
    run(node, [(poll(s=backoff - 0.000_001), []), (poll(s=backoff), [claim(3)])])


def test_the_backoff_counts_from_the_latest_fault():
    run(
        driver(),
        [(fault(s=0), [degraded()]), (fault(s=10), []), (poll(s=10.1), []), (poll(s=10.2), [claim(3)])],
    )


REPLIES = [
    pytest.param([(poll(), [claim(3)])], claimed(s=0.01), [RUNNING], id="a claim"),
    pytest.param(
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (succeeded(1), [report(ok(1))])],
        reported(applied=[1], s=0.01),
        [RUNNING, REPOLL],
        id="an outcome report",
    ),
    pytest.param(
        [(poll(), [claim(3)]), (claimed(1), execute(1))],
        beat_done(renewed(1), s=0.01),
        [RUNNING],
        id="a heartbeat",
    ),
    pytest.param([(maintenance(), [sweep(), load()])], expired(0, s=0.01), [RUNNING], id="a sweep"),
]


@pytest.mark.parametrize(("before", "reply", "expected"), REPLIES)
def test_a_successful_store_reply_clears_the_degradation_at_once(before, reply, expected):
    node = driver()
    run(node, [*before, (fault(), [degraded()]), (reply, expected)])
    run(node, [(poll(s=MIN / 5), [claim(3)])])  # well within the backoff that was cleared


FAILED_REPLIES = [
    pytest.param([(poll(), [claim(3)])], claimed(failed=True), id="a failed claim"),
    pytest.param(
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (succeeded(1), [report(ok(1))])],
        reported(failed=True),
        id="a failed outcome report",
    ),
    pytest.param(
        [(poll(), [claim(3)]), (claimed(1), execute(1))], beat_done(failed=True), id="a failed heartbeat"
    ),
    pytest.param([(maintenance(), [sweep(), load()])], expired(0, failed=True), id="a failed sweep"),
]


@pytest.mark.parametrize(("before", "reply"), FAILED_REPLIES)
def test_a_failed_store_reply_leaves_the_pump_degraded(before, reply):
    node = driver()
    run(node, [*before, (fault(), [degraded()]), (reply, [])])
    assert (node.health, node.store_faults) == (Health.DEGRADED, 1)


def test_faults_in_a_row_restart_from_the_shortest_backoff_after_a_recovery():
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (fault(), [degraded()]),
            (fault(), []),
            (fault(), []),  # backing off for 0.4 s
            (claimed(s=0.01), [RUNNING]),
            (fault(s=1), [degraded()]),
            (poll(s=1 + MIN), [claim(3)]),
        ],
    )


def test_a_heartbeat_records_the_status_every_time():
    run(
        driver(),
        [
            (beat_due(), [RUNNING]),
            (beat_due(s=10), [RUNNING]),
            (fault(s=10), [degraded()]),
            (beat_due(s=20), [degraded()]),
            (beat_due(s=30), [degraded()]),
        ],
    )


# -- faults no retry can cure -----------------------------------------------------------------------------


def test_a_fault_that_no_retry_can_cure_halts_the_pump():
    run(driver(), [(poll(), [claim(3)]), (fatal(FATAL), HALTED)])


def test_a_halt_is_the_last_command_even_when_a_deadline_fired_in_the_same_step():
    run(
        driver(timeout=secs(10)),
        [
            (poll(), [claim(3)]),
            (claimed(1), [*execute(1, cut_off=12), wake(10)]),  # 10 s and the grace
            (fatal(FATAL, s=10), [*signal(1), *HALTED]),  # no WakeAt for the timeout's grace
        ],
    )


def test_a_halt_outranks_a_degradation():
    run(driver(), [(fault(), [degraded()]), (fatal(FATAL), HALTED)])


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_after_a_halt_every_event_is_ignored(event):
    node = driver()
    run(node, [(poll(), [claim(3)]), (fatal(FATAL), HALTED)])
    assert node.halted
    assert node.step(event) == []


# -- abandoned handler threads ----------------------------------------------------------------------------

THREADS = [
    scenario(
        "abandoned threads still running degrade the pump, with how many",
        [(threads(2), [degraded(TWO_THREADS)])],
    ),
    scenario(
        "the detail says how many pool slots are lost",
        [(threads(2), [degraded(TWO_THREADS)]), (threads(2, unreplaced=1), [degraded(TWO_THREADS_ONE_SLOT)])],
    ),
    scenario(
        "the same count again records nothing",
        [(threads(2), [degraded(TWO_THREADS)]), (threads(2), [])],
    ),
    scenario(
        "when the last abandoned thread ends the pump runs again",
        [(threads(2, unreplaced=1), [degraded(TWO_THREADS_ONE_SLOT)]), (threads(0), [RUNNING])],
    ),
    scenario("no abandoned thread on a running pump records nothing", [(threads(0), [])]),
    scenario(
        "a store fault's detail outranks the threads', which show again once the store is back",
        [
            (poll(), [claim(3)]),
            (threads(2), [degraded(TWO_THREADS)]),
            (fault(), [degraded()]),
            (threads(2, unreplaced=1), []),
            (claimed(s=0.01), [degraded(TWO_THREADS_ONE_SLOT)]),
        ],
    ),
]


@pytest.mark.parametrize(("dials", "script"), THREADS)
def test_abandoned_handler_threads_degrade_the_pump(dials, script):
    run(driver(**dials), script)
