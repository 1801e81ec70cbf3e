"""Maintenance: the sweep of expired leases, on its cadence, one at a time, repeated while batches come back
full."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core.dispatch import Strict
from backwave_django.core.retry import RetryPolicy

from .helpers import (
    Q,
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
