"""Outcomes: how a handler's ending is classified, batching, what flushes a batch, and a failed write."""

from __future__ import annotations

import pytest

from backwave_django.core.driver import STOP_WINDOW, TIMEOUT_GRACE
from backwave_django.core.records import OutcomeKind
from backwave_django.core.retry import RetryPolicy

from .helpers import (
    REPOLL,
    RUNNING,
    STOPPED,
    beat_done,
    beat_due,
    cancel_asked,
    cancelled,
    claim,
    claimed,
    driver,
    execute,
    failed,
    heartbeat,
    idle,
    job,
    ok,
    outcome,
    poll,
    raised,
    released,
    report,
    reported,
    run,
    scenario,
    secs,
    shutdown,
    signal,
    succeeded,
    timed_out,
    timer,
    unroutable,
    wake,
)

# -- each ending becomes one report -----------------------------------------------------------------------

ENDINGS = [
    pytest.param(job(1), succeeded(1), ok(1), id="the handler returned: succeeded"),
    pytest.param(
        job(1), raised(1, "ValueError: bad input"), failed(1, "ValueError: bad input"), id="it raised: failed"
    ),
    pytest.param(
        job(1, attempt=10),
        raised(1),
        failed(1, attempt=10),
        id="a failure at the ceiling is still reported as a failure: the store decides what follows",
    ),
    pytest.param(
        job(1, attempt=3, max_attempts=3),
        raised(1),
        failed(1, attempt=3, max_attempts=3),
        id="the report carries the job's own ceiling as claimed",
    ),
    pytest.param(
        job(1, attempt=2),
        unroutable(1, "no handler for 'tests.gone'"),
        outcome(1, OutcomeKind.UNROUTABLE, "no handler for 'tests.gone'", attempt=2),
        id="no handler: unroutable, with the reason",
    ),
]


@pytest.mark.parametrize(("claimed_job", "ending", "expected"), ENDINGS)
def test_each_kind_of_ending_becomes_one_outcome_report(claimed_job, ending, expected):
    run(
        driver(),
        [(poll(), [claim(3)]), (claimed(claimed_job), execute(claimed_job)), (ending, [report(expected)])],
    )


def test_the_report_carries_the_configured_retry_policy_for_the_store_to_decide_with():
    policy = RetryPolicy(max_attempts=4, backoff_base=3, backoff_cap=30)
    run(
        driver(retry=policy),
        [
            (poll(), [claim(3)]),
            (claimed(job(1, attempt=2)), execute(job(1, attempt=2))),
            (raised(1, "boom"), [report(failed(1, attempt=2), retry=policy)]),
        ],
    )


# -- a failure after the handler was asked to stop is classified by why it was asked -------------------------


#: How job 1 (claimed at T0, with a 10 s timeout) is asked to stop, and the commands that ask it.
ASKED_TO_STOP = {
    "operator": (beat_done(cancel_asked(1), s=1), signal(1)),
    "timeout": (timer(10), [*signal(1), wake(10 + TIMEOUT_GRACE.total_seconds())]),
    "shutdown": (shutdown(grace=0, s=1), [*signal(1), wake(1 + STOP_WINDOW.total_seconds())]),
}


CLASSIFIED = [
    pytest.param("operator", raised(1, "JobCancelled", s=2), cancelled(1), id="operator cancel: cancelled"),
    pytest.param(
        "timeout", raised(1, "JobCancelled", s=11), timed_out(1, "10"), id="timeout: failed, timed out"
    ),
    pytest.param("shutdown", raised(1, "JobCancelled", s=2), released(1), id="shutdown: released"),
    pytest.param("operator", succeeded(1, s=2), ok(1), id="operator cancel, but it returned: succeeded"),
    pytest.param("timeout", succeeded(1, s=11), ok(1), id="timeout, but it returned: succeeded"),
    pytest.param("shutdown", succeeded(1, s=2), ok(1), id="shutdown, but it returned: succeeded"),
    pytest.param(
        "operator",
        unroutable(1, "payload no longer fits", s=2),
        outcome(1, OutcomeKind.UNROUTABLE, "payload no longer fits"),
        id="operator cancel, but unroutable: unroutable",
    ),
]


@pytest.mark.parametrize(("why", "ending", "expected"), CLASSIFIED)
def test_a_handler_asked_to_stop_ends_by_why_it_was_asked(why, ending, expected):
    run(
        driver(timeout=secs(10)),
        [
            (poll(), [claim(3)]),
            (claimed(1), [*execute(1, cut_off=10 + TIMEOUT_GRACE.total_seconds()), wake(10)]),
            ASKED_TO_STOP[why],
            (ending, [report(expected)]),
        ],
    )


def test_a_failure_nobody_asked_for_keeps_the_handler_message():
    node = driver(timeout=secs(10))
    run(
        node,
        [
            (poll(), [claim(3)]),
            (claimed(1), [*execute(1, cut_off=10 + TIMEOUT_GRACE.total_seconds()), wake(10)]),
            (raised(1, "KeyError: 'user'", s=9), [report(failed(1, "KeyError: 'user'"))]),
            (timer(10), []),  # the timeout of an Attempt that ended is skipped
        ],
    )


# -- batching ---------------------------------------------------------------------------------------------

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
        "the outcome batch is its own dial, larger than the claim batch",
        [
            (poll(), [claim(2)]),
            (claimed(1, 2), [*execute(1, 2), REPOLL]),
            (poll(), [claim(2)]),
            (claimed(3, 4), execute(3, 4)),
            (succeeded(1), []),
            (succeeded(2), []),
            (succeeded(3), [report(ok(1), ok(2), ok(3))]),
        ],
        max_claim_batch=2,
        max_outcome_batch=3,
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
            (raised(1), []),
            (succeeded(2), [report(ok(3), failed(1), ok(2))]),
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
            (beat_due(), [RUNNING, report(ok(2)), heartbeat(1, 3)]),
            (beat_due(), [RUNNING, heartbeat(1, 3)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a result for a job that is not running is dropped",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (succeeded(9), []),
            (raised(9), []),
            (unroutable(9), []),
        ],
    ),
]


@pytest.mark.parametrize(("dials", "script"), BATCHING)
def test_outcomes_are_batched_and_flushed_by_the_rules(dials, script):
    run(driver(**dials), script)


# -- Idle: the Shell has absorbed a burst ------------------------------------------------------------------

# A job ended before the shutdown and its first write failed: the next idle moment writes it again.
DURING_SHUTDOWN = [
    (poll(), [claim(3)]),
    (claimed(1, 2), execute(1, 2)),
    (succeeded(1), []),
    (shutdown(grace=30), [report(ok(1)), wake(30)]),
    (reported(failed=True), []),
    (idle(), [report(ok(1))]),
]

IDLE = [
    scenario("with nothing at all, idle does nothing", [(idle(), [])]),
    scenario(
        "with jobs running and nothing buffered, idle does nothing, even with free slots",
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (idle(), [])],
    ),
    scenario(
        "with outcomes buffered, idle flushes and claims like a poll",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (idle(), [report(ok(1)), claim(2)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "with outcomes buffered and a claim in flight, idle only flushes",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (poll(), [claim(2)]),
            (succeeded(1), []),
            (idle(), [report(ok(1))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "with outcomes buffered during shutdown, idle only flushes",
        DURING_SHUTDOWN,
        max_outcome_batch=10,
    ),
]


@pytest.mark.parametrize(("dials", "script"), IDLE)
def test_idle_flushes_buffered_outcomes_and_nothing_else(dials, script):
    run(driver(**dials), script)


# -- the linger: an outcome waits a little for those of the handlers still running --------------------------

L = 0.01  # the linger these scenarios set (the default is the Core's REPORT_LINGER)

LINGER = [
    scenario(
        "while others run, idle keeps an outcome back and asks to be woken when its linger ends",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (idle(), [wake(L)]),
            (idle(s=L / 2), []),  # the same linger: no second deadline
            (timer(s=L), [report(ok(1)), claim(2)]),
        ],
    ),
    scenario(
        "the linger runs from the oldest outcome buffered, not the newest",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (idle(), [wake(L)]),
            (succeeded(2, s=L / 2), []),
            (idle(s=L / 2), []),
            (timer(s=L), [report(ok(1), ok(2)), claim(1)]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "the last running handler's outcome is written at once, with those that lingered; the deadline then "
        "finds nothing",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (idle(), [wake(L)]),
            (succeeded(2, s=L / 2), [report(ok(1), ok(2))]),
            (timer(s=L), []),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "an idle moment past the linger writes at once",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2), execute(1, 2)),
            (succeeded(1), []),
            (idle(s=2 * L), [report(ok(1)), claim(2)]),
        ],
    ),
    scenario(
        "a new linger after one has fired gets a deadline of its own",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (idle(), [wake(L)]),
            (timer(s=L), [report(ok(1)), claim(1)]),
            (succeeded(2, s=L), []),
            (idle(s=L), [wake(2 * L)]),
            (timer(s=2 * L), [report(ok(2))]),  # the claim is still in flight
        ],
    ),
    scenario(
        "during shutdown nothing lingers",
        DURING_SHUTDOWN,
    ),
]


@pytest.mark.parametrize(("dials", "script"), LINGER)
def test_an_outcome_lingers_for_the_running_handlers_but_never_past_its_linger(dials, script):
    run(driver(report_linger=secs(L), **dials), script)


# -- answers to a report ----------------------------------------------------------------------------------

REPOLLS = [
    pytest.param(reported(applied=[1]), [REPOLL], id="an applied outcome asks for a poll"),
    pytest.param(reported(applied=[1], stale=[2]), [REPOLL], id="one poll per batch, however many applied"),
    pytest.param(reported(stale=[1]), [], id="stale outcomes only ask for nothing"),
    pytest.param(reported(failed=True), [], id="a failed write asks for nothing"),
]


@pytest.mark.parametrize(("answer", "expected"), REPOLLS)
def test_an_applied_outcome_requests_a_queued_poll(answer, expected):
    run(
        driver(),
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (succeeded(1), [report(ok(1))]), (answer, expected)],
    )


def test_a_failed_write_puts_its_batch_back_at_the_front_of_the_buffer():
    node = driver(max_outcome_batch=10)
    run(
        node,
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (poll(), [report(ok(1)), claim(1)]),
            (succeeded(2), []),
            (reported(failed=True), []),
        ],
    )
    assert node.buffer == [ok(1), ok(2)]
    assert not node.reports_in_flight
    assert node.occupied == 4  # the unwritten outcomes still hold their leases, and so their slots
    run(node, [(succeeded(3), [report(ok(1), ok(2), ok(3))]), (reported(applied=[1, 2, 3]), [REPOLL])])


def test_a_batch_is_written_again_until_the_store_takes_it():
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(failed=True), []),
            (poll(s=1), [report(ok(1)), claim(3)]),
            (reported(failed=True), []),
            (poll(s=2), [report(ok(1))]),  # the claim is still in flight
            (reported(applied=[1]), [REPOLL]),
        ],
    )


def test_reports_in_flight_are_answered_in_the_order_they_were_sent():
    node = driver(max_outcome_batch=1)
    run(
        node,
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), [report(ok(1))]),
            (succeeded(2), [report(ok(2))]),
            (reported(failed=True), []),  # the answer to the first batch: job 1's
        ],
    )
    assert node.buffer == [ok(1)]
    assert [batch for batch in node.reports_in_flight] == [(ok(2),)]


def test_an_outcome_answer_without_a_report_in_flight_is_a_broken_invariant():
    with pytest.raises(AssertionError, match="no report in flight"):
        driver().step(reported(applied=[1]))


def test_a_drained_driver_stops_once_its_last_report_is_written():
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=30), [wake(30)]),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1]), STOPPED),
        ],
    )
