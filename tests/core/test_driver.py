"""The Node Driver, step by step: each test feeds ``step(event)`` a script and asserts the exact commands.

A script is a list of ``(event, expected commands)`` pairs, run in order on one fresh Driver. The tables are
grouped by concern; the ids say which behaviour each row pins down.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core import events as ev
from backwave_django.core.dispatch import Strict, Weighted
from backwave_django.core.driver import DriverConfig, NodeDriver
from backwave_django.core.records import ClaimedJob, HeartbeatResult, OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=60)
Q = ("default",)
Step = tuple[ev.Event, list[cmd.Command]]


# -- builders: times, jobs, events, commands --------------------------------------------------------------


def at(seconds: float = 0) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(job_id: int, *, attempt: int = 1, max_attempts: int = 10, queue: str = "default") -> ClaimedJob:
    return ClaimedJob(
        id=job_id,
        wire_name="tests.noop",
        queue=queue,
        payload="{}",
        attempt=attempt,
        max_attempts=max_attempts,
        due_at=T0,
    )


def as_job(item: int | ClaimedJob) -> ClaimedJob:
    return item if isinstance(item, ClaimedJob) else job(item)


def poll(s: float = 0) -> ev.PollDue:
    return ev.PollDue(now=at(s))


def claimed(*jobs: int | ClaimedJob, s: float = 0, failed: bool = False) -> ev.ClaimCompleted:
    return ev.ClaimCompleted(now=at(s), jobs=tuple(as_job(j) for j in jobs), failed=failed)


def succeeded(job_id: int, s: float = 0) -> ev.ExecutionSucceeded:
    return ev.ExecutionSucceeded(now=at(s), job_id=job_id)


def raised(job_id: int, message: str = "boom", s: float = 0) -> ev.ExecutionFailed:
    return ev.ExecutionFailed(now=at(s), job_id=job_id, message=message)


def reported(
    applied: Sequence[int] = (), stale: Sequence[int] = (), *, failed: bool = False
) -> ev.OutcomesReported:
    return ev.OutcomesReported(now=T0, applied=frozenset(applied), stale=frozenset(stale), failed=failed)


def beat_due(s: float = 0) -> ev.HeartbeatDue:
    return ev.HeartbeatDue(now=at(s))


def beat_done(*results: HeartbeatResult, failed: bool = False) -> ev.HeartbeatCompleted:
    return ev.HeartbeatCompleted(now=T0, results=results, failed=failed)


def renewed(job_id: int) -> HeartbeatResult:
    return HeartbeatResult(job_id=job_id, renewed=True, cancel_requested=False)


def lost(job_id: int) -> HeartbeatResult:
    return HeartbeatResult(job_id=job_id, renewed=False, cancel_requested=False)


def cancel_asked(job_id: int) -> HeartbeatResult:
    return HeartbeatResult(job_id=job_id, renewed=True, cancel_requested=True)


def maintenance(s: float = 0) -> ev.MaintenanceDue:
    return ev.MaintenanceDue(now=at(s))


def expired(count: int, *, failed: bool = False) -> ev.LeasesExpired:
    return ev.LeasesExpired(now=T0, count=count, failed=failed)


def shutdown() -> ev.ShutdownRequested:
    return ev.ShutdownRequested(now=T0)


def grace_over() -> ev.GraceExpired:
    return ev.GraceExpired(now=T0)


def released(*, failed: bool = False) -> ev.LeasesReleased:
    return ev.LeasesReleased(now=T0, failed=failed)


def claim(n: int, queues: tuple[str, ...] = Q) -> cmd.ClaimBatch:
    return cmd.ClaimBatch(queues=queues, max_jobs=n, lease_duration=LEASE)


def execute(*jobs: int | ClaimedJob) -> list[cmd.Command]:
    return [cmd.ExecuteJob(job=as_job(j)) for j in jobs]


def ok(job_id: int) -> OutcomeReport:
    return OutcomeReport(job_id=job_id, attempt=1, kind=OutcomeKind.SUCCEEDED)


def cancelled(job_id: int, attempt: int = 1) -> OutcomeReport:
    return OutcomeReport(
        job_id=job_id, attempt=attempt, kind=OutcomeKind.CANCELLED, message="operator-cancel"
    )


def signal(job_id: int) -> cmd.SignalCancellation:
    return cmd.SignalCancellation(job_id=job_id)


def report(*reports: OutcomeReport) -> cmd.ReportOutcomes:
    return cmd.ReportOutcomes(reports=reports)


def heartbeat(*job_ids: int) -> cmd.Heartbeat:
    return cmd.Heartbeat(job_ids=job_ids, lease_duration=LEASE)


def sweep(max_jobs: int = 3, queues: tuple[str, ...] = Q) -> cmd.ExpireLeases:
    return cmd.ExpireLeases(queues=queues, max_jobs=max_jobs, retry=RetryPolicy(jitter=False))


def abandon(*job_ids: int) -> list[cmd.Command]:
    return [cmd.AbandonExecution(job_id=i) for i in job_ids]


STOP = cmd.Stop()
REPOLL = cmd.RequestPoll()


def weighted(*weights: tuple[str, int]) -> Callable[[], Weighted]:
    """A factory: a Weighted policy keeps credit, so every scenario must get a fresh one."""
    return partial(Weighted, weights)


def make_driver(policy: Any = None, **dials: Any) -> NodeDriver:
    """A Driver with a small pool (4) and claim batch (3), so every cap shows in a short script."""
    if callable(policy):
        policy = policy()
    dials = {"pool_size": 4, "max_claim_batch": 3, "retry": RetryPolicy(jitter=False), **dials}
    return NodeDriver(DriverConfig(policy=policy or Strict(Q), **dials))


def run(driver: NodeDriver, script: Sequence[Step]) -> None:
    for number, (event, expected) in enumerate(script, start=1):
        assert driver.step(event) == expected, f"step {number}: {event!r}"
        assert driver.occupied <= driver.config.pool_size, f"step {number} overshot the pool"


def scenario(name: str, script: list[Step], policy: Any = None, **dials: Any) -> Any:
    return pytest.param(policy, dials, script, id=name)


# -- claim sizing and backpressure ------------------------------------------------------------------------

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
]


@pytest.mark.parametrize(("policy", "dials", "script"), CLAIM_SIZING)
def test_claims_are_sized_by_the_free_slots_of_the_pool(policy, dials, script):
    run(make_driver(policy, **dials), script)


def test_claim_sizing_counts_every_kind_of_held_slot():
    driver = make_driver(pool_size=10, max_claim_batch=10, max_outcome_batch=10)
    run(
        driver,
        [
            (poll(), [claim(10)]),
            (claimed(1, 2, 3, 4), execute(1, 2, 3, 4)),
            (succeeded(1), []),
            (succeeded(2), []),
            (poll(), [report(ok(1), ok(2)), claim(6)]),
            (succeeded(3), []),
        ],
    )
    # 1 running, 1 buffered, 2 being reported and 6 reserved: the pool is full
    assert (len(driver.executing), len(driver.buffer), sum(driver.reports_in_flight)) == (1, 1, 2)
    assert list(driver.reservations) == [6]
    assert (driver.occupied, driver.available) == (10, 0)


def test_a_claim_completion_without_a_claim_in_flight_is_a_broken_invariant():
    driver = make_driver()
    with pytest.raises(AssertionError, match="no claim in flight"):
        driver.step(claimed(1))
    run(driver, [(poll(), [claim(3)]), (claimed(), [])])
    with pytest.raises(AssertionError, match="no claim in flight"):
        driver.step(claimed())


def test_a_job_claimed_while_it_already_runs_is_a_broken_invariant():
    driver = make_driver()
    run(driver, [(poll(), [claim(3)]), (claimed(1), execute(1)), (poll(), [claim(3)])])
    with pytest.raises(AssertionError, match="job 1 was claimed while this pump already runs it"):
        driver.step(claimed(2, 1))


def test_the_same_job_twice_in_one_claim_is_a_broken_invariant():
    driver = make_driver()
    driver.step(poll())
    with pytest.raises(AssertionError, match="job 7 was claimed"):
        driver.step(claimed(7, 7))


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
        [(poll(), [claim(2, ("a", "b"))]), (claimed(failed=True), [])],
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


@pytest.mark.parametrize(("policy", "dials", "script"), DISPATCH)
def test_dispatch_policies_shape_the_claims(policy, dials, script):
    run(make_driver(policy, **dials), script)


def test_weighted_charges_credit_only_for_the_claims_it_issues():
    issued = Weighted((("a", 6), ("b", 3), ("c", 1)))
    driver = make_driver(issued, pool_size=10, max_claim_batch=10)
    run(driver, [(poll(), [claim(6, ("a", "b", "c"))]), (claimed(), [])])

    only_first = Weighted((("a", 6), ("b", 3), ("c", 1)))
    only_first.charge(only_first.plan(10)[0])
    assert issued.credits == only_first.credits
    assert issued.credits["c"] > 0  # the dropped queue kept the credit it built up

    everything = Weighted((("a", 6), ("b", 3), ("c", 1)))
    for planned in everything.plan(10):
        everything.charge(planned)
    assert issued.credits != everything.credits


# -- outcome batching -------------------------------------------------------------------------------------

BATCHING = [
    scenario(
        "a full batch flushes while other jobs still run",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (succeeded(2), [report(ok(1), ok(2))]),
        ],
        max_outcome_batch=2,
    ),
    scenario(
        "the outcome batch defaults to max_claim_batch",
        [
            (poll(), [claim(2)]),
            (claimed(1, 2), [*execute(1, 2), REPOLL]),
            (poll(), [claim(2)]),
            (claimed(3, 4), execute(3, 4)),
            (succeeded(1), []),
            (succeeded(2), [report(ok(1), ok(2))]),
        ],
        max_claim_batch=2,
    ),
    scenario(
        "a lone result is flushed at once",
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (succeeded(1), [report(ok(1))])],
    ),
    scenario(
        "the last running job flushes a partial batch (drain tail)",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(2), []),
            (succeeded(1), [report(ok(2), ok(1))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "outcomes are reported in completion order",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(3), []),
            (succeeded(1), []),
            (succeeded(2), [report(ok(3), ok(1), ok(2))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a poll flushes a partial buffer even when it cannot claim",
        [
            (poll(), [claim(2)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (poll(), [report(ok(1))]),
        ],
        pool_size=2,
        max_outcome_batch=10,
    ),
    scenario(
        "a heartbeat flushes a partial buffer, then beats for the jobs still running",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(2), []),
            (beat_due(), [report(ok(2)), heartbeat(1, 3)]),
            (beat_due(), [heartbeat(1, 3)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a result for a job that is not running is dropped",
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (succeeded(9), []), (raised(9), [])],
    ),
]


@pytest.mark.parametrize(("policy", "dials", "script"), BATCHING)
def test_outcomes_are_batched_and_flushed_by_the_rules(policy, dials, script):
    run(make_driver(policy, **dials), script)


# -- how an Attempt ends, and the retry decision -------------------------------------------------------------

NOW = 100  # the outcome happens at T0 + 100 s


def failure(attempt: int, retry_in: float | None, message: str = "boom", job_id: int = 1) -> OutcomeReport:
    """The report of a failure at T0 + NOW: retried ``retry_in`` seconds later, or dead-lettered (None)."""
    retry_at = None if retry_in is None else at(NOW + retry_in)
    return OutcomeReport(
        job_id=job_id, attempt=attempt, kind=OutcomeKind.FAILED, retry_at=retry_at, message=message
    )


OUTCOMES = [
    pytest.param(
        job(1),
        succeeded(1, s=NOW),
        OutcomeReport(job_id=1, attempt=1, kind=OutcomeKind.SUCCEEDED),
        id="success",
    ),
    pytest.param(
        job(1),
        raised(1, "ValueError: bad input", s=NOW),
        failure(1, 2, "ValueError: bad input"),
        id="first failure retries in 2 s",
    ),
    pytest.param(job(1, attempt=4), raised(1, s=NOW), failure(4, 16), id="fourth failure retries in 16 s"),
    pytest.param(job(1, attempt=9), raised(1, s=NOW), failure(9, 300), id="ninth failure retries at the cap"),
    pytest.param(job(1, attempt=10), raised(1, s=NOW), failure(10, None), id="tenth failure dead-letters"),
    pytest.param(
        job(1, attempt=3, max_attempts=3),
        raised(1, s=NOW),
        failure(3, None),
        id="the job's own lower ceiling dead-letters",
    ),
    pytest.param(
        job(1, attempt=10, max_attempts=12),
        raised(1, s=NOW),
        failure(10, 300),
        id="the job's own higher ceiling still retries",
    ),
    pytest.param(
        job(1, attempt=2),
        ev.ExecutionCancelled(now=at(NOW), job_id=1),
        cancelled(1, attempt=2),
        id="operator cancel",
    ),
    pytest.param(
        job(1),
        ev.ExecutionUnroutable(now=at(NOW), job_id=1, reason="no handler for 'tests.gone'"),
        OutcomeReport(
            job_id=1, attempt=1, kind=OutcomeKind.UNROUTABLE, message="no handler for 'tests.gone'"
        ),
        id="unroutable, never retried",
    ),
]


@pytest.mark.parametrize(("claimed_job", "finished", "expected"), OUTCOMES)
def test_each_kind_of_ending_becomes_one_outcome_report(claimed_job, finished, expected):
    run(
        make_driver(),
        [(poll(), [claim(3)]), (claimed(claimed_job), execute(claimed_job)), (finished, [report(expected)])],
    )


def test_the_retry_decision_uses_the_configured_backoff():
    driver = make_driver(retry=RetryPolicy(backoff_base=3, backoff_cap=60, jitter=False))
    run(
        driver,
        [
            (poll(), [claim(3)]),
            (claimed(job(1, attempt=2), job(2, attempt=5)), execute(job(1, attempt=2), job(2, attempt=5))),
            (raised(1, s=NOW), []),
            (
                raised(2, s=NOW + 1),
                [
                    report(
                        failure(2, 9),
                        OutcomeReport(
                            job_id=2,
                            attempt=5,
                            kind=OutcomeKind.FAILED,
                            retry_at=at(NOW + 1 + 60),
                            message="boom",
                        ),
                    )
                ],
            ),
        ],
    )


# -- re-poll rules ----------------------------------------------------------------------------------------

REPOLLS = [
    pytest.param(reported(applied=[1]), [REPOLL], id="an applied outcome asks for a poll"),
    pytest.param(reported(applied=[1], stale=[2]), [REPOLL], id="one poll per batch, however many applied"),
    pytest.param(reported(stale=[1]), [], id="stale outcomes only ask for nothing"),
    pytest.param(reported(failed=True), [], id="a failed write asks for nothing"),
]


@pytest.mark.parametrize(("answer", "expected"), REPOLLS)
def test_an_applied_outcome_requests_a_queued_poll(answer, expected):
    run(
        make_driver(),
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (succeeded(1), [report(ok(1))]), (answer, expected)],
    )


def test_an_outcome_answer_without_a_report_in_flight_is_a_broken_invariant():
    with pytest.raises(AssertionError, match="no report in flight"):
        make_driver().step(reported(applied=[1]))


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
            (shutdown(), []),
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


@pytest.mark.parametrize(("policy", "dials", "script"), FULL_CLAIMS)
def test_a_full_claim_with_free_slots_asks_for_a_poll_at_once(policy, dials, script):
    run(make_driver(policy, **dials), script)


# -- heartbeats and cancellation --------------------------------------------------------------------------

RUNNING_1_2 = [(poll(), [claim(3)]), (claimed(1, 2), execute(1, 2))]

HEARTBEATS = [
    scenario("nothing running sends no heartbeat", [(beat_due(), [])]),
    scenario("a heartbeat covers every running job", [*RUNNING_1_2, (beat_due(), [heartbeat(1, 2)])]),
    scenario(
        "a lost lease abandons the execution, drops its result and frees its slot",
        [
            *RUNNING_1_2,
            (beat_due(), [heartbeat(1, 2)]),
            (beat_done(lost(1), renewed(2)), abandon(1)),
            (succeeded(1), []),
            (beat_due(), [heartbeat(2)]),
            (poll(), [claim(3)]),
        ],
    ),
    scenario(
        "a cancel request is signalled exactly once",
        [
            *RUNNING_1_2,
            (beat_done(cancel_asked(1), renewed(2)), [signal(1)]),
            (beat_done(cancel_asked(1), renewed(2)), []),
            (ev.ExecutionCancelled(now=T0, job_id=1), []),
            (succeeded(2), [report(cancelled(1), ok(2))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a lease lost after a cancel signal is still abandoned",
        [
            *RUNNING_1_2,
            (beat_done(cancel_asked(1)), [signal(1)]),
            (beat_done(lost(1)), abandon(1)),
        ],
    ),
    scenario(
        "the next Attempt of a cancelled job can be signalled again",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (beat_done(cancel_asked(1)), [signal(1)]),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1]), [REPOLL]),
            (poll(), [claim(3)]),
            (claimed(job(1, attempt=2)), execute(job(1, attempt=2))),
            (beat_done(cancel_asked(1)), [signal(1)]),
        ],
    ),
    scenario(
        "results for jobs that finished while the heartbeat was in flight are ignored",
        [
            *RUNNING_1_2,
            (beat_due(), [heartbeat(1, 2)]),
            (succeeded(1), []),
            (beat_done(lost(1), cancel_asked(1), renewed(2)), []),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "abandoning the last running job flushes the partial buffer (drain tail)",
        [
            *RUNNING_1_2,
            (succeeded(1), []),
            (beat_done(lost(2)), [*abandon(2), report(ok(1))]),
            (reported(applied=[1]), [REPOLL]),
            (poll(), [claim(3)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "abandoning every running job at once flushes the buffer once, after the abandons",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (beat_done(lost(2), lost(3)), [*abandon(2, 3), report(ok(1))]),
            (succeeded(2), []),  # abandoned: its result is dropped, nothing left to flush
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "abandoning a job while others still run keeps the partial buffer",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (beat_done(lost(2), renewed(3)), abandon(2)),
            (succeeded(3), [report(ok(1), ok(3))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "abandoning the last running job with nothing buffered reports nothing",
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (beat_done(lost(1)), abandon(1))],
    ),
    scenario(
        "a failed heartbeat changes nothing",
        [*RUNNING_1_2, (beat_done(failed=True), []), (beat_due(), [heartbeat(1, 2)])],
    ),
]


@pytest.mark.parametrize(("policy", "dials", "script"), HEARTBEATS)
def test_heartbeat_results_abandon_lost_jobs_and_signal_cancels(policy, dials, script):
    run(make_driver(policy, **dials), script)


# -- maintenance cadence ----------------------------------------------------------------------------------

MAINTENANCE = [
    scenario("the first maintenance tick sweeps expired leases", [(maintenance(), [sweep()])]),
    scenario(
        "maintenance waits for its interval",
        [
            (maintenance(0), [sweep()]),
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
            (maintenance(0), [sweep()]),
            (maintenance(10), []),
            (maintenance(20), []),
            (expired(0), []),
            (maintenance(20), [sweep()]),
        ],
    ),
    scenario(
        "a full batch sweeps again at once until a short one comes back",
        [
            (maintenance(0), [sweep()]),
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
            (maintenance(0), [sweep()]),
            (expired(3, failed=True), []),
            (maintenance(1), []),
            (maintenance(5), [sweep()]),
        ],
    ),
    scenario(
        "maintenance runs while the pool is full",
        [(poll(), [claim(2)]), (claimed(1, 2), execute(1, 2)), (poll(), []), (maintenance(), [sweep()])],
        pool_size=2,
    ),
    scenario(
        "a zero interval sweeps on every tick",
        [(maintenance(0), [sweep()]), (expired(0), []), (maintenance(0), [sweep()])],
        maintenance_interval=timedelta(0),
    ),
    scenario(
        "the sweep covers the served queues with the group retry policy",
        [(maintenance(), [sweep(max_jobs=3, queues=HML)])],
        policy=Strict(HML),
    ),
    scenario(
        "a weighted group sweeps its queues in declaration order",
        [(maintenance(), [sweep(queues=("b", "a"))])],
        policy=weighted(("b", 1), ("a", 5)),
    ),
]


@pytest.mark.parametrize(("policy", "dials", "script"), MAINTENANCE)
def test_maintenance_sweeps_expired_leases_on_its_cadence(policy, dials, script):
    run(make_driver(policy, **dials), script)


def test_the_sweep_carries_the_configured_retry_policy_and_batch():
    policy = RetryPolicy(max_attempts=4, backoff_cap=30)
    driver = make_driver(retry=policy, max_claim_batch=7)
    assert driver.step(maintenance()) == [cmd.ExpireLeases(queues=Q, max_jobs=7, retry=policy)]
    assert driver.step(expired(7)) == [cmd.ExpireLeases(queues=Q, max_jobs=7, retry=policy)]


# -- shutdown and drain -----------------------------------------------------------------------------------

SHUTDOWN = [
    scenario("an idle driver stops at once", [(shutdown(), [STOP])]),
    scenario(
        "shutdown flushes, stops claiming and waits for running jobs",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (shutdown(), [report(ok(1))]),
            (poll(), []),
            (succeeded(2), [report(ok(2))]),  # while draining, every result is written at once
            (reported(applied=[1]), []),  # and no re-poll
            (beat_due(), [heartbeat(3)]),
            (raised(3, s=NOW), [report(failure(1, 2, job_id=3))]),
            (reported(applied=[2]), []),
            (reported(applied=[3]), [STOP]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a claim in flight at shutdown still runs its jobs",
        [
            (poll(), [claim(3)]),
            (shutdown(), []),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1]), [STOP]),
        ],
    ),
    scenario(
        "an empty claim completing during shutdown lets the driver stop",
        [(poll(), [claim(3)]), (shutdown(), []), (claimed(), [STOP])],
    ),
    scenario(
        "shutdown drops the rest of a weighted pass",
        [
            (poll(), [claim(2, ("a", "b"))]),
            (shutdown(), []),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(stale=[1]), [STOP]),
        ],
        policy=weighted(("a", 2), ("b", 1)),
        pool_size=3,
    ),
    scenario(
        "a lease lost during shutdown can complete the drain",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(), []),
            (beat_done(lost(1)), [*abandon(1), STOP]),
        ],
    ),
    scenario(
        "grace expiry releases and abandons running jobs, then stops once the release is answered",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (shutdown(), [report(ok(1))]),
            (grace_over(), [cmd.ReleaseLeases(job_ids=(2, 3)), *abandon(2, 3)]),
            (succeeded(2), []),  # abandoned: its result is dropped
            (released(), []),  # the outcome report is still in flight
            (reported(applied=[1]), [STOP]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "grace expiry without a shutdown first flushes, releases, and stops after the release",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (grace_over(), [report(ok(1)), cmd.ReleaseLeases(job_ids=(2,)), *abandon(2)]),
            (reported(applied=[1]), []),
            (released(), [STOP]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a failed release still lets the driver stop",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (grace_over(), [cmd.ReleaseLeases(job_ids=(1,)), *abandon(1)]),
            (released(failed=True), [STOP]),
        ],
    ),
    scenario(
        "an empty claim landing after the grace period lets the driver stop",
        [(poll(), [claim(3)]), (grace_over(), []), (claimed(), [STOP])],
    ),
    scenario(
        "a failed claim landing after the grace period lets the driver stop",
        [(poll(), [claim(3)]), (grace_over(), []), (claimed(failed=True), [STOP])],
    ),
    scenario(
        "the stop waits for every release in flight",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (poll(), [claim(3)]),
            (grace_over(), [cmd.ReleaseLeases(job_ids=(1,)), *abandon(1)]),
            (claimed(2, 3), [cmd.ReleaseLeases(job_ids=(2, 3))]),
            (released(), []),  # one release is still in flight
            (released(failed=True), [STOP]),
        ],
    ),
    scenario(
        "a claim landing after the grace period waits for the outcome report in flight too",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (poll(), [claim(3)]),
            (succeeded(1), [report(ok(1))]),
            (grace_over(), []),  # nothing runs, but a claim and a report are in flight
            (claimed(2), [cmd.ReleaseLeases(job_ids=(2,))]),
            (released(), []),
            (reported(applied=[1]), [STOP]),
        ],
    ),
    scenario(
        "a weighted pass is not continued after the grace period",
        [
            (poll(), [claim(2, ("a", "b"))]),
            (grace_over(), []),
            (claimed(1, 2), [cmd.ReleaseLeases(job_ids=(1, 2))]),  # no follow-up claim for b
            (poll(), []),
            (released(), [STOP]),
        ],
        policy=weighted(("a", 2), ("b", 1)),
        pool_size=3,
    ),
    scenario("grace expiry with nothing running stops at once", [(grace_over(), [STOP])]),
]


@pytest.mark.parametrize(("policy", "dials", "script"), SHUTDOWN)
def test_shutdown_drains_then_stops(policy, dials, script):
    run(make_driver(policy, **dials), script)


def test_a_release_answer_with_no_release_in_flight_is_an_invariant_violation():
    with pytest.raises(AssertionError, match="no release in flight"):
        make_driver().step(released())


def test_jobs_claimed_after_the_grace_period_are_not_started():
    driver = make_driver()
    run(
        driver,
        [
            (poll(), [claim(3)]),
            (shutdown(), []),
            (grace_over(), []),  # the claim is still in flight
            (claimed(1, 2), [cmd.ReleaseLeases(job_ids=(1, 2))]),  # given straight back, never executed
        ],
    )
    assert not driver.executing
    assert not driver.stopped  # the release is still in flight
    run(driver, [(released(), [STOP])])


EVERY_EVENT = [
    poll(),
    claimed(1),
    succeeded(1),
    raised(1),
    ev.ExecutionCancelled(now=T0, job_id=1),
    ev.ExecutionUnroutable(now=T0, job_id=1, reason="gone"),
    reported(applied=[1]),
    beat_due(),
    beat_done(lost(1)),
    maintenance(),
    expired(3),
    shutdown(),
    grace_over(),
    released(),
]


def test_every_event_type_is_listed_once():
    assert {type(e) for e in EVERY_EVENT} == set(ev.Event.__args__)
    assert len(EVERY_EVENT) == len(ev.Event.__args__)


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_after_stop_every_event_is_ignored(event):
    driver = make_driver()
    run(driver, [(poll(), [claim(3)]), (claimed(1), execute(1)), (shutdown(), [])])
    run(driver, [(grace_over(), [cmd.ReleaseLeases(job_ids=(1,)), *abandon(1)]), (released(), [STOP])])
    assert driver.stopped
    assert driver.step(event) == []


def test_an_unknown_event_is_a_type_error():
    driver = make_driver()
    with pytest.raises(TypeError, match="unknown event: 'not an event'"):
        driver.step("not an event")  # type: ignore[arg-type]


# -- a property: bursts of polls never overshoot the pool -------------------------------------------------


@dataclass
class FakeShell:
    """Obeys the Driver like the pump would, answering store calls in FIFO order, at random moments.

    It keeps its own count of the leases this worker holds, independent of the Driver's bookkeeping.
    """

    driver: NodeDriver
    rng: random.Random
    claims: deque[int] = field(default_factory=deque)  # max_jobs of each unanswered claim
    reports: deque[tuple[int, ...]] = field(default_factory=deque)
    beats: deque[tuple[int, ...]] = field(default_factory=deque)
    polls: int = 0  # RequestPolls queued behind other events
    running: list[int] = field(default_factory=list)
    held: set[int] = field(default_factory=set)  # claimed and not yet written back or lost
    sweeps: int = 0
    peak: int = 0  # the most leases held at once
    next_id: int = 1
    clock: float = 0.0

    def step(self, event: ev.Event) -> None:
        for command in self.driver.step(event):
            self.obey(command)
        leased = len(self.held) + sum(self.claims)
        self.peak = max(self.peak, leased)
        assert leased <= self.driver.config.pool_size, "the worker holds more leases than its pool"
        assert self.driver.occupied <= self.driver.config.pool_size
        assert self.sweeps <= 1, "two sweeps in flight"

    def obey(self, command: cmd.Command) -> None:
        match command:
            case cmd.ClaimBatch(max_jobs=n):
                assert 0 < n <= self.driver.config.max_claim_batch
                self.claims.append(n)
            case cmd.ExecuteJob(job=claimed_job):
                self.running.append(claimed_job.id)
            case cmd.ReportOutcomes(reports=batch):
                self.reports.append(tuple(r.job_id for r in batch))
            case cmd.Heartbeat(job_ids=ids):
                self.beats.append(ids)
            case cmd.ExpireLeases():
                self.sweeps += 1
            case cmd.AbandonExecution(job_id=job_id):
                self.running.remove(job_id)
                self.held.discard(job_id)
            case cmd.RequestPoll():
                self.polls += 1
            case cmd.SignalCancellation():
                pass
            case _:  # pragma: no cover - no shutdown in this run
                raise AssertionError(f"unexpected {command!r}")

    def now(self) -> datetime:
        self.clock += self.rng.random()
        return at(self.clock)

    def act(self) -> None:
        """One thing happens, chosen at random among the things that can happen now."""
        rng = self.rng
        actions = [self.burst_of_polls, self.heartbeat_tick, self.maintenance_tick]
        if self.polls:
            actions.append(self.obey_queued_polls)
        if self.claims:
            actions.append(self.answer_claim)
        if self.running:
            actions.append(self.finish_a_job)
        if self.reports:
            actions.append(self.answer_report)
        if self.beats:
            actions.append(self.answer_heartbeat)
        if self.sweeps:
            actions.append(self.answer_sweep)
        rng.choice(actions)()

    def burst_of_polls(self) -> None:  # poll ticks and wake-up hints arriving together
        for _ in range(self.rng.randint(1, 5)):
            self.step(ev.PollDue(now=self.now()))

    def obey_queued_polls(self) -> None:  # every queued RequestPoll, back to back
        while self.polls:
            self.polls -= 1
            self.step(ev.PollDue(now=self.now()))

    def answer_claim(self) -> None:
        n = self.claims.popleft()
        jobs = [job(self.next_id + i) for i in range(self.rng.randint(0, n))]
        self.next_id += len(jobs)
        self.held.update(j.id for j in jobs)
        failed = not jobs and self.rng.random() < 0.2
        self.step(ev.ClaimCompleted(now=self.now(), jobs=tuple(jobs), failed=failed))

    def finish_a_job(self) -> None:
        job_id = self.running.pop(self.rng.randrange(len(self.running)))
        if self.rng.random() < 0.7:
            self.step(ev.ExecutionSucceeded(now=self.now(), job_id=job_id))
        else:
            self.step(ev.ExecutionFailed(now=self.now(), job_id=job_id, message="boom"))

    def answer_report(self) -> None:
        ids = self.reports.popleft()
        self.held.difference_update(ids)
        applied = frozenset(i for i in ids if self.rng.random() < 0.8)
        self.step(ev.OutcomesReported(now=self.now(), applied=applied, stale=frozenset(ids) - applied))

    def heartbeat_tick(self) -> None:
        self.step(ev.HeartbeatDue(now=self.now()))

    def answer_heartbeat(self) -> None:
        results = tuple(
            HeartbeatResult(
                job_id=i, renewed=self.rng.random() < 0.9, cancel_requested=self.rng.random() < 0.1
            )
            for i in self.beats.popleft()
        )
        self.step(ev.HeartbeatCompleted(now=self.now(), results=results))

    def maintenance_tick(self) -> None:
        self.step(ev.MaintenanceDue(now=self.now()))

    def answer_sweep(self) -> None:
        self.sweeps -= 1
        self.step(ev.LeasesExpired(now=self.now(), count=self.rng.choice([0, 1, 4])))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    "policy",
    [partial(Strict, ("a", "b")), weighted(("a", 3), ("b", 1)), weighted(("a", 1), ("b", 1), ("c", 5))],
    ids=["strict", "weighted-3-1", "weighted-1-1-5"],
)
def test_claims_never_overshoot_the_pool_under_a_burst_of_polls(policy, seed):
    driver = make_driver(
        policy, pool_size=7, max_claim_batch=4, max_outcome_batch=3, maintenance_interval=timedelta(seconds=2)
    )
    shell = FakeShell(driver=driver, rng=random.Random(seed))
    for _ in range(400):
        shell.act()
    assert shell.peak == driver.config.pool_size, "the run never filled the pool, so it proves nothing"
    assert shell.next_id > 20, "the run claimed too little to prove anything"
