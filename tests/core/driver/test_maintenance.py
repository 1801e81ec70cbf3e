"""Maintenance: the sweep of expired leases, on its cadence, one at a time, repeated while batches come back
full."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core import events as ev
from backwave_django.core.dispatch import Strict
from backwave_django.core.retention import MAX_PURGE_BATCH, SUCCEEDED_CLASS, PurgeRule, RetentionRule
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.schedules import Cadence, Misfire, ScheduleState

from .helpers import (
    REPOLL,
    Q,
    at,
    claim,
    claimed,
    driver,
    execute,
    expired,
    load,
    maintenance,
    poll,
    run,
    scenario,
    shutdown,
    sweep,
    wake,
    weighted,
)

HML = ("high", "mid", "low")

MAINTENANCE = [
    scenario("the first maintenance tick sweeps expired leases", [(maintenance(), [sweep(), load()])]),
    scenario(
        "a tick the Shell knows no lease has lapsed by skips the sweep, but not the rest",
        [(maintenance(leases_lapsed=False), [load()]), (maintenance(5), [sweep()])],
    ),
    scenario(
        "maintenance waits for its interval",
        [
            (maintenance(0), [sweep(), load()]),
            (expired(0), []),
            (maintenance(4.999), []),
            (maintenance(5), [sweep()]),
            (expired(1), []),
            (maintenance(9), []),
            (maintenance(10), [sweep()]),
        ],
    ),
    scenario(
        "never two sweeps in flight",
        [
            (maintenance(0), [sweep(), load()]),
            (maintenance(10), []),
            (maintenance(20), []),
            (expired(0), []),
            (maintenance(20), [sweep()]),
        ],
    ),
    scenario(
        "a full batch sweeps again at once until a short one comes back",
        [
            (maintenance(0), [sweep(), load()]),
            (expired(3), [sweep()]),
            (maintenance(10), []),  # the repeat is still in flight
            (expired(3), [sweep()]),
            (expired(2), []),
            (maintenance(4), []),  # the interval counts from the tick that started the run
        ],
    ),
    scenario(
        "a failed sweep is not repeated before the next interval",
        [
            (maintenance(0), [sweep(), load()]),
            (expired(3, failed=True), []),
            (maintenance(1), []),
            (maintenance(5), [sweep()]),
        ],
    ),
    scenario(
        "maintenance runs while the pool is full",
        [
            (poll(), [claim(2)]),
            (claimed(1, 2), execute(1, 2)),
            (poll(), []),
            (maintenance(), [sweep(), load()]),
        ],
        pool_size=2,
    ),
    scenario(
        "a zero interval sweeps on every tick",
        [(maintenance(0), [sweep(), load()]), (expired(0), []), (maintenance(0), [sweep()])],
        maintenance_interval=timedelta(0),
    ),
    scenario(
        "the sweep covers the served queues",
        [(maintenance(), [sweep(max_jobs=3, queues=HML), load(HML)])],
        policy=Strict(HML),
    ),
    scenario(
        "a weighted group sweeps its queues in declaration order",
        [(maintenance(), [sweep(queues=("b", "a")), load(("b", "a"))])],
        policy=weighted(("b", 1), ("a", 5)),
    ),
    scenario(
        "a full batch landing during shutdown is not swept again",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (maintenance(), [sweep(), load()]),
            (shutdown(grace=30), [wake(30)]),
            (expired(3), []),
        ],
    ),
    scenario(
        "maintenance does nothing during shutdown",
        [(poll(), [claim(3)]), (shutdown(grace=30), [wake(30)]), (maintenance(10), [])],
    ),
]


@pytest.mark.parametrize(("dials", "script"), MAINTENANCE)
def test_maintenance_sweeps_expired_leases_on_its_cadence(dials, script):
    run(driver(**dials), script)


def test_the_sweep_carries_the_configured_retry_policy_and_batch():
    policy = RetryPolicy(max_attempts=4, backoff_cap=30)
    node = driver(retry=policy, max_claim_batch=7)
    assert node.step(maintenance()) == [cmd.ExpireLeases(queues=Q, max_jobs=7, retry=policy), load()]
    assert node.step(expired(7)) == [cmd.ExpireLeases(queues=Q, max_jobs=7, retry=policy)]


# -- schedules ---------------------------------------------------------------------------------------------

HOURLY = ScheduleState(
    name="hourly",
    cadence=Cadence(cron="0 * * * *"),
    misfire=Misfire.SKIP,
    no_overlap=False,
    cursor=at(0),
    paused=False,
    has_live_instance=False,
)


def loaded(*schedules: ScheduleState, s: float = 0, failed: bool = False) -> ev.SchedulesLoaded:
    return ev.SchedulesLoaded(now=at(s), schedules=schedules, failed=failed)


def test_maintenance_loads_the_schedules_and_mints_what_is_due():
    node = driver()
    due = 3600 + 2
    run(node, [(maintenance(s=due), [sweep(), load()])])
    [mint] = node.step(loaded(HOURLY, s=due))
    assert isinstance(mint, cmd.MintSchedules)
    [decision] = mint.decisions
    assert decision.ticks == (at(3600),) and decision.expected_cursor == at(0)
    run(node, [(ev.SchedulesMinted(now=at(due), minted=1), [REPOLL])])  # a minted job is due now


def test_nothing_due_mints_nothing_and_a_barren_mint_asks_for_no_poll():
    node = driver()
    run(node, [(maintenance(), [sweep(), load()]), (loaded(HOURLY, s=1), [])])
    node = driver()
    run(node, [(maintenance(s=3601), [sweep(), load()])])
    node.step(loaded(HOURLY, s=3601))
    run(node, [(ev.SchedulesMinted(now=at(3601), minted=0), [])])  # another node minted the tick first


def test_the_schedules_are_not_loaded_again_while_a_mint_is_in_flight():
    node = driver(maintenance_interval=timedelta(0))
    run(node, [(maintenance(s=3601), [sweep(), load()])])
    node.step(loaded(HOURLY, s=3601))  # the mint is in flight
    run(node, [(expired(0, s=3601), []), (maintenance(s=3602), [sweep()])])


def test_a_failed_load_mints_nothing_and_the_next_tick_loads_again():
    node = driver()
    run(
        node,
        [
            (maintenance(), [sweep(), load()]),
            (loaded(failed=True), []),
            (expired(0), []),
            (maintenance(s=5), [sweep(), load()]),
        ],
    )


def test_schedules_loaded_during_shutdown_are_not_minted():
    node = driver()
    run(
        node,
        [
            (poll(s=3601), [claim(3)]),
            (claimed(1, s=3601), execute(1)),
            (maintenance(s=3601), [sweep(), load()]),
            (shutdown(grace=30, s=3601), [wake(3631)]),
            (loaded(HOURLY, s=3601), []),
        ],
    )


# -- retention ---------------------------------------------------------------------------------------------

KEEP = RetentionRule(queues=Q, succeeded=timedelta(days=1), failed=None)


def purge(now_s: float) -> cmd.PurgeFinished:
    rules = (PurgeRule(queues=Q, states=SUCCEEDED_CLASS, before=at(now_s) - timedelta(days=1)),)
    return cmd.PurgeFinished(rules=rules, max_jobs=MAX_PURGE_BATCH)


def test_retention_purges_on_the_maintenance_tick_and_again_at_once_while_batches_come_back_full():
    node = driver(retention=(KEEP,))
    run(
        node,
        [
            (maintenance(), [sweep(), load(), purge(0)]),
            (ev.FinishedPurged(now=at(1), count=MAX_PURGE_BATCH), [purge(1)]),
            (ev.FinishedPurged(now=at(2), count=MAX_PURGE_BATCH - 1), []),
        ],
    )


def test_no_retention_purges_nothing_and_a_failed_purge_waits_a_minute():
    run(driver(), [(maintenance(), [sweep(), load()])])
    node = driver(retention=(KEEP,))
    run(node, [(maintenance(), [sweep(), load(), purge(0)]), (ev.FinishedPurged(now=at(1), failed=True), [])])
    run(node, [(expired(0, s=1), []), (loaded(s=1), []), (maintenance(s=5), [sweep(), load()])])
    run(node, [(expired(0, s=6), []), (loaded(s=6), []), (maintenance(s=61), [sweep(), load(), purge(61)])])


def test_a_purge_in_flight_is_not_started_twice():
    node = driver(retention=(KEEP,))
    run(
        node,
        [
            (maintenance(), [sweep(), load(), purge(0)]),
            (expired(0), []),
            (loaded(), []),
            (maintenance(s=5), [sweep(), load()]),  # the purge is still in flight
        ],
    )
