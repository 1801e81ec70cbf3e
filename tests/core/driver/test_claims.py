"""Claims: Backpressure (sized by the free slots of the pool), reservations, dispatch passes, full claims."""

from __future__ import annotations

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core.dispatch import Strict, Weighted

from .helpers import (
    REPOLL,
    RUNNING,
    claim,
    claimed,
    degraded,
    driver,
    execute,
    job,
    ok,
    poll,
    report,
    reported,
    run,
    scenario,
    shutdown,
    succeeded,
    threads,
    wake,
    weighted,
)

# -- claim sizing and backpressure ------------------------------------------------------------------------

RUNNING_3 = "3 abandoned handler thread(s) still running"
LOST_1_OF_1 = "1 abandoned handler thread(s) still running; 1 pool slot(s) lost until they end"
LOST_2_OF_2 = "2 abandoned handler thread(s) still running; 2 pool slot(s) lost until they end"
LOST_4_OF_4 = "4 abandoned handler thread(s) still running; 4 pool slot(s) lost until they end"

CLAIM_SIZING = [
    scenario("the first poll claims up to max_claim_batch", [(poll(), [claim(3)])]),
    scenario("a pool smaller than the batch caps the claim", [(poll(), [claim(2)])], pool_size=2),
    scenario(
        "a poll while a claim is in flight claims nothing more: that claim continues the pass",
        [(poll(), [claim(3)]), (poll(), []), (claimed(), []), (poll(), [claim(3)])],
    ),
    scenario(
        "claimed jobs hold their slots while they run",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (poll(), [claim(2)]),
            (claimed(3, 4), execute(3, 4)),
            (poll(), []),
        ],
    ),
    scenario(
        "a buffered outcome holds its slot and the poll flushes it before claiming",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (poll(), [report(ok(1)), claim(1)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "an outcome report in flight holds its slot until answered",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (poll(), [report(ok(1)), claim(1)]),
            (poll(), []),
            (claimed(), []),
            (poll(), [claim(1)]),
            (reported(applied=[1]), [REPOLL]),
            (claimed(), []),
            (poll(), [claim(2)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a full pool issues no claim",
        [(poll(), [claim(2)]), (claimed(1, 2), execute(1, 2)), (poll(), []), (poll(), [])],
        pool_size=2,
    ),
    scenario(
        "a failed claim gives its reservation back",
        [(poll(), [claim(3)]), (claimed(failed=True), []), (poll(), [claim(3)])],
    ),
    scenario(
        "a claim that returns fewer jobs frees the rest of its reservation",
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (poll(), [claim(3)])],
    ),
    scenario(
        "pool slots lost to abandoned threads shrink the claims",
        [
            (threads(2, unreplaced=2), [degraded(LOST_2_OF_2)]),
            (poll(), [claim(2)]),
            (claimed(1), execute(1)),
            (poll(), [claim(1)]),
        ],
    ),
    scenario(
        "lost pool slots come back as their threads end",
        [
            (threads(4, unreplaced=4), [degraded(LOST_4_OF_4)]),
            (poll(), []),
            (threads(1, unreplaced=1), [degraded(LOST_1_OF_1)]),
            (poll(), [claim(3)]),
            (threads(0, unreplaced=0), [RUNNING]),
            (claimed(), []),
            (poll(), [claim(3)]),
        ],
    ),
    scenario(
        "abandoned threads the pool replaced hold no slot",
        [(threads(3, unreplaced=0), [degraded(RUNNING_3)]), (poll(), [claim(3)])],
    ),
]


@pytest.mark.parametrize(("dials", "script"), CLAIM_SIZING)
def test_claims_are_sized_by_the_free_slots_of_the_pool(dials, script):
    run(driver(**dials), script)


def test_claim_sizing_counts_every_kind_of_held_slot():
    node = driver(pool_size=12, max_claim_batch=10, max_outcome_batch=10)
    node.step(threads(3, unreplaced=2))
    run(
        node,
        [
            (poll(), [claim(10)]),
            (claimed(1, 2, 3, 4), execute(1, 2, 3, 4)),
            (succeeded(1), []),
            (succeeded(2), []),
            (poll(), [report(ok(1), ok(2)), claim(6)]),
            (succeeded(3), []),
        ],
    )
    # 1 running, 1 buffered, 2 being reported, 6 reserved and 2 lost to abandoned threads: the pool is full
    assert (len(node.executing), len(node.buffer)) == (1, 1)
    assert [len(batch) for batch in node.reports_in_flight] == [2]
    assert (list(node.reservations), node.lost_slots) == ([6], 2)
    assert (node.occupied, node.available) == (12, 0)


def test_a_claim_completion_without_a_claim_in_flight_is_a_broken_invariant():
    node = driver()
    with pytest.raises(AssertionError, match="no claim in flight"):
        node.step(claimed(1))
    run(node, [(poll(), [claim(3)]), (claimed(), [])])
    with pytest.raises(AssertionError, match="no claim in flight"):
        node.step(claimed())


def test_a_job_claimed_again_while_its_old_run_goes_on_gives_that_run_up():
    # The pump lost the lease (its heartbeats failed until the sweep took it) and claims the job anew.
    node = driver()
    again = job(1, attempt=2)
    run(
        node,
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (poll(), [claim(3)]),
            (claimed(again), [cmd.AbandonExecution(job_id=1), *execute(again)]),
        ],
    )
    assert node.executing[1].job.attempt == 2


def test_the_same_job_twice_in_one_claim_is_a_broken_invariant():
    node = driver()
    node.step(poll())
    with pytest.raises(AssertionError, match="the same job twice"):
        node.step(claimed(7, 7))


# -- dispatch: Strict and Weighted ------------------------------------------------------------------------

HML = ("high", "mid", "low")

DISPATCH = [
    scenario(
        "strict asks for every queue in priority order in one claim",
        [
            (poll(), [claim(4, HML)]),
            (claimed(1), execute(1)),  # free slots, but Strict never follows up
            (poll(), [claim(3, HML)]),
        ],
        policy=Strict(HML),
        max_claim_batch=32,
    ),
    scenario(
        "weighted issues one claim with the poll and the next after a non-empty completion",
        [
            (poll(), [claim(2, ("a", "b"))]),
            (claimed(1), [*execute(1), claim(1, ("b", "a"))]),
            (claimed(2), [*execute(2), REPOLL]),  # the last claim of the pass was full
        ],
        policy=weighted(("a", 2), ("b", 1)),
        pool_size=3,
    ),
    scenario(
        "weighted issues every batch of a pass in declaration order while claims return jobs",
        [
            (poll(), [claim(6, ("a", "b", "c"))]),
            (claimed(1, 2, 3, 4, 5, 6), [*execute(1, 2, 3, 4, 5, 6), claim(3, ("b", "a", "c"))]),
            (claimed(7), [*execute(7), claim(1, ("c", "a", "b"))]),
            (claimed(8), [*execute(8), REPOLL]),
            (poll(), [claim(1, ("a", "b", "c"))]),  # the pass is over: a new poll plans afresh
        ],
        policy=weighted(("a", 6), ("b", 3), ("c", 1)),
        pool_size=10,
        max_claim_batch=10,
    ),
    scenario(
        "weighted drops the rest of the pass after an empty claim",
        [(poll(), [claim(2, ("a", "b"))]), (claimed(), []), (poll(), [claim(2, ("a", "b"))])],
        policy=weighted(("a", 2), ("b", 1)),
        pool_size=3,
    ),
    scenario(
        "weighted drops the rest of the pass after a failed claim",
        [(poll(), [claim(2, ("a", "b"))]), (claimed(failed=True), []), (poll(), [claim(2, ("a", "b"))])],
        policy=weighted(("a", 2), ("b", 1)),
        pool_size=3,
    ),
    scenario(
        "weighted clamps a follow-up claim to the slots still free",
        [
            (poll(), [claim(1, ("a", "b"))]),
            # a store that hands back more than it was asked for must not push the pass past the pool
            (claimed(1, 2), [*execute(1, 2), claim(2, ("b", "a"))]),
        ],
        policy=weighted(("a", 1), ("b", 2)),
        pool_size=4,
        max_claim_batch=4,
    ),
    scenario(
        "weighted ends the pass when no slot is left for the follow-up claim",
        [(poll(), [claim(1, ("a", "b"))]), (claimed(1, 2), execute(1, 2)), (poll(), [])],
        policy=weighted(("a", 1), ("b", 1)),
        pool_size=2,
    ),
]


@pytest.mark.parametrize(("dials", "script"), DISPATCH)
def test_dispatch_policies_shape_the_claims(dials, script):
    run(driver(**dials), script)


def test_weighted_charges_credit_only_for_the_claims_it_issues():
    issued = Weighted((("a", 6), ("b", 3), ("c", 1)))
    node = driver(policy=issued, pool_size=10, max_claim_batch=10)
    run(node, [(poll(), [claim(6, ("a", "b", "c"))]), (claimed(), [])])

    only_first = Weighted((("a", 6), ("b", 3), ("c", 1)))
    only_first.charge(only_first.plan(10)[0])
    assert issued.credits == only_first.credits
    assert issued.credits["c"] > 0  # the dropped queue kept the credit it built up

    everything = Weighted((("a", 6), ("b", 3), ("c", 1)))
    for planned in everything.plan(10):
        everything.charge(planned)
    assert issued.credits != everything.credits


# -- full claims ------------------------------------------------------------------------------------------
# A claim that comes back full (as many jobs as it reserved) says more work is probably waiting: when the
# jobs leave slots free, the driver asks for a queued poll at once instead of waiting for the next tick.

FULL_CLAIMS = [
    scenario(
        "a full claim that leaves free slots asks for a poll after starting its jobs",
        [(poll(), [claim(3)]), (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]), (poll(), [claim(1)])],
    ),
    scenario(
        "full claims keep asking until one fills the pool",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (poll(), [claim(3)]),
            (claimed(4, 5, 6), [*execute(4, 5, 6), REPOLL]),
            (poll(), [claim(2)]),
            (claimed(7, 8), execute(7, 8)),  # full, but the pool is full too
            (poll(), []),
        ],
        pool_size=8,
    ),
    scenario(
        "a full claim that exactly fills the pool asks for nothing",
        [(poll(), [claim(3)]), (claimed(1, 2, 3), execute(1, 2, 3))],
        pool_size=3,
    ),
    scenario(
        "a short claim asks for nothing",
        [(poll(), [claim(3)]), (claimed(1, 2), execute(1, 2))],
    ),
    scenario("an empty claim asks for nothing", [(poll(), [claim(3)]), (claimed(), [])]),
    scenario("a failed claim asks for nothing", [(poll(), [claim(3)]), (claimed(failed=True), [])]),
    scenario(
        "a claim sized below the batch is full when it returns what it reserved",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),  # two of three: short
            (poll(), [claim(2)]),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1]), [REPOLL]),  # a slot came free while the claim was in flight
            (claimed(3, 4), [*execute(3, 4), REPOLL]),  # two of two: full
        ],
        max_outcome_batch=1,
    ),
    scenario(
        "a store that returns more jobs than reserved still counts as full",
        [(poll(), [claim(3)]), (claimed(1, 2, 3, 4), [*execute(1, 2, 3, 4), REPOLL])],
        pool_size=10,
    ),
    scenario(
        "a full claim landing during shutdown asks for nothing",
        [
            (poll(), [claim(3)]),
            (shutdown(grace=30), [wake(30)]),
            (claimed(1, 2, 3), execute(1, 2, 3)),
            (poll(), []),
        ],
    ),
    scenario(
        "weighted issues the next planned claim instead of a poll while its pass has claims left",
        [
            (poll(), [claim(6, ("a", "b", "c"))]),
            (claimed(1, 2, 3, 4, 5, 6), [*execute(1, 2, 3, 4, 5, 6), claim(3, ("b", "a", "c"))]),
            (claimed(7, 8, 9), [*execute(7, 8, 9), claim(1, ("c", "a", "b"))]),
            (claimed(10), [*execute(10), REPOLL]),  # the last claim of the pass was full
            (poll(), [claim(1, ("a", "b", "c"))]),
        ],
        policy=weighted(("a", 6), ("b", 3), ("c", 1)),
        pool_size=12,
        max_claim_batch=10,
    ),
    scenario(
        "weighted asks for nothing when the last claim of its pass comes back short",
        [
            (poll(), [claim(2, ("a", "b"))]),
            (claimed(1, 2), [*execute(1, 2), claim(2, ("b", "a"))]),
            (claimed(3), execute(3)),
        ],
        policy=weighted(("a", 1), ("b", 1)),
        pool_size=6,
        max_claim_batch=4,
    ),
]


@pytest.mark.parametrize(("dials", "script"), FULL_CLAIMS)
def test_a_full_claim_with_free_slots_asks_for_a_poll_at_once(dials, script):
    run(driver(**dials), script)


# -- looking again after a report --------------------------------------------------------------------------

LOOK_AGAIN = [
    scenario(
        "after a claim that came back short, a report that opened nothing waits for the next poll",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1], opened=False), []),
        ],
    ),
    scenario(
        "after a claim that came back short, a report that opened work looks again",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1], opened=True), [REPOLL]),
        ],
    ),
    scenario(
        "after a claim that came back full, every applied report looks again: more may wait",
        [
            (poll(), [claim(2)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (succeeded(2), [report(ok(1), ok(2))]),
            (reported(applied=[1, 2], opened=False), [REPOLL]),
        ],
        pool_size=2,
    ),
    scenario(
        "after a claim that failed, every applied report looks again: nothing is known",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (poll(), [claim(3)]),
            (claimed(failed=True), []),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1], opened=False), [REPOLL]),
        ],
    ),
    scenario(
        "a report that applied nothing never looks again",
        [
            (poll(), [claim(2)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (succeeded(2), [report(ok(1), ok(2))]),
            (reported(stale=[1, 2], opened=True), []),
        ],
        pool_size=2,
    ),
]


@pytest.mark.parametrize(("dials", "script"), LOOK_AGAIN)
def test_a_report_looks_again_when_the_last_claim_left_work_or_the_report_opened_some(dials, script):
    run(driver(**dials), script)


def test_a_claimed_job_is_executed_as_the_store_returned_it():
    with_everything = job(5, attempt=3, max_attempts=4, queue="mail", timeout=None)
    run(driver(), [(poll(), [claim(3)]), (claimed(with_everything), execute(with_everything))])
