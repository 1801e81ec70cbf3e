"""When a worker group grows by a Pump and when it lets one go (core.elastic), and what a Driver tells it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.core.elastic import RETIRE_AFTER, STARVED_AFTER, Starvation, resize

from .driver.helpers import claimed, driver, poll

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def starved(at: datetime = T0) -> Starvation:
    pump = Starvation(wide=20)
    for _ in range(STARVED_AFTER):
        pump.observe(20, 20, at)
    return pump


def test_full_claims_with_half_the_pool_free_in_a_row_starve_a_pump():
    pump = Starvation(wide=20)
    for seen in range(1, STARVED_AFTER):
        pump.observe(10, 10, T0)  # half the pool asked for and given: the pool waited on the claim
        assert (pump.streak, pump.starved) == (seen, False)
    pump.observe(10, 10, T0 + timedelta(seconds=1))
    assert pump.starved and pump.last_starved == T0 + timedelta(seconds=1)


@pytest.mark.parametrize(
    ("asked", "got"),
    [
        pytest.param(20, 19, id="a claim that came back short: no more work was waiting"),
        pytest.param(9, 9, id="a full claim for less than half the pool: the pool was busy with handlers"),
        pytest.param(10, 0, id="an empty claim"),
    ],
)
def test_any_other_claim_ends_the_streak_and_keeps_when_the_last_starved_one_landed(asked, got):
    pump = starved()
    pump.observe(asked, got, T0 + timedelta(seconds=5))
    assert (pump.streak, pump.starved, pump.last_starved) == (0, False, T0)


def test_a_group_grows_only_while_every_pump_is_starved_and_only_up_to_its_ceiling():
    assert resize([starved()], floor=1, ceiling=2, now=T0) == 1
    assert resize([starved(), Starvation(wide=20)], floor=1, ceiling=3, now=T0) == 0  # the new one: not yet
    assert resize([starved(), starved()], floor=1, ceiling=3, now=T0) == 1
    assert resize([starved(), starved()], floor=1, ceiling=2, now=T0) == 0  # at MAX_PUMPS
    assert resize([starved()], floor=1, ceiling=1, now=T0) == 0  # MAX_PUMPS = PUMPS: a fixed group


def test_a_group_lets_an_extra_pump_go_once_none_has_starved_for_the_retire_time():
    calm = [starved(), Starvation(wide=20)]
    calm[0].observe(20, 3, T0)  # the backlog ended
    assert resize(calm, floor=1, ceiling=2, now=T0 + RETIRE_AFTER - timedelta(microseconds=1)) == 0
    assert resize(calm, floor=1, ceiling=2, now=T0 + RETIRE_AFTER) == -1
    assert resize(calm[:1], floor=1, ceiling=2, now=T0 + RETIRE_AFTER) == 0  # never below PUMPS
    assert resize([Starvation(wide=20)] * 2, floor=1, ceiling=2, now=T0) == -1  # never starved at all


def test_a_group_below_its_floor_is_left_to_the_node():
    assert resize([], floor=1, ceiling=2, now=T0) == 0


def test_the_driver_counts_its_claims_for_the_node_but_not_a_failed_one():
    node = driver(pool_size=4, max_claim_batch=4)
    node.step(poll())
    node.step(claimed(1, 2, 3, 4))
    assert node.starvation.streak == 1 and node.starvation.wide == 4
    stuck = driver(pool_size=4, max_claim_batch=4)
    stuck.step(poll())
    stuck.step(claimed(failed=True))
    assert stuck.starvation.streak == 0 and stuck.starvation.last_starved is None
