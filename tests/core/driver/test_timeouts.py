"""Handler timeouts: the deadline a claim sets, the signal at it, the grace after it, and the WakeAt commands
that ask the Shell to wake the Driver at the earliest deadline."""

from __future__ import annotations

import pytest

from backwave_django.core.driver import FINAL_FLUSH_WINDOW, STOP_WINDOW, TIMEOUT_GRACE

from .helpers import (
    REPOLL,
    RUNNING,
    STOPPED,
    abandon,
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
    job,
    lost,
    ok,
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
    wake,
)

GRACE = TIMEOUT_GRACE.total_seconds()
WINDOW = STOP_WINDOW.total_seconds()
FINAL = FINAL_FLUSH_WINDOW.total_seconds()

DEADLINES = [
    scenario(
        "without a timeout anywhere a claimed job gets no deadline",
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (timer(10**6), [])],
    ),
    scenario(
        "a claimed job gets the group's timeout, and the Shell is asked to wake the Driver at it",
        [(poll(), [claim(3)]), (claimed(1, s=1), [*execute(1, cut_off=11 + GRACE), wake(11)])],
        timeout=secs(10),
    ),
    scenario(
        "a job's own timeout overrides the group's",
        [
            (poll(), [claim(3)]),
            (claimed(job(1, timeout=3), s=1), [*execute(job(1, timeout=3), cut_off=4 + GRACE), wake(4)]),
        ],
        timeout=secs(10),
    ),
    scenario(
        "a job's own timeout applies where the group has none",
        [
            (poll(), [claim(3)]),
            (claimed(job(1, timeout=3)), [*execute(job(1, timeout=3), cut_off=3 + GRACE), wake(3)]),
        ],
    ),
    scenario(
        "each job of a claim gets its own deadline, and the wake-up is for the earliest",
        [
            (poll(), [claim(3)]),
            (
                claimed(1, job(2, timeout=4), job(3, timeout=20)),
                [*execute(1, job(2, timeout=4), job(3, timeout=20), cut_off=[12, 6, 22]), REPOLL, wake(4)],
            ),
        ],
        timeout=secs(10),
    ),
    scenario(
        "a later deadline asks for no new wake-up",
        [
            (poll(), [claim(3)]),
            (claimed(1), [*execute(1, cut_off=10 + GRACE), wake(10)]),
            (poll(s=1), [claim(3)]),
            (claimed(2, s=2), execute(2, cut_off=12 + GRACE)),
        ],
        timeout=secs(10),
    ),
    scenario(
        "an earlier deadline asks for an earlier wake-up",
        [
            (poll(), [claim(3)]),
            (claimed(1), [*execute(1, cut_off=10 + GRACE), wake(10)]),
            (poll(s=1), [claim(3)]),
            (claimed(job(2, timeout=1), s=2), [*execute(job(2, timeout=1), cut_off=3 + GRACE), wake(3)]),
            (timer(3), [*signal(2), wake(3 + GRACE)]),
        ],
        timeout=secs(10),
    ),
]


@pytest.mark.parametrize(("dials", "script"), DEADLINES)
def test_a_claimed_job_gets_a_timeout_deadline(dials, script):
    run(driver(**dials), script)


#: The tables below run with the group's timeout at 10 s, unless a scenario sets another.
TEN_SECONDS = {"timeout": secs(10)}
TIMED_OUT = report(timed_out(1, "10"))
RUNNING_1 = [(poll(), [claim(3)]), (claimed(1), [*execute(1, cut_off=10 + GRACE), wake(10)])]

AT_THE_TIMEOUT = [
    scenario(
        "at its timeout a handler is asked to stop, and has the grace to do it",
        [*RUNNING_1, (timer(10), [*signal(1), wake(10 + GRACE)])],
    ),
    scenario(
        "a handler that stops within the grace fails as timed out, and its grace deadline is skipped",
        [
            *RUNNING_1,
            (timer(10), [*signal(1), wake(10 + GRACE)]),
            (raised(1, "JobCancelled", s=11), [report(timed_out(1, "10"))]),
            (timer(10 + GRACE), []),
        ],
    ),
    scenario(
        "a handler that ignores its timeout is cut off at the end of the grace, then fails as timed out",
        [
            *RUNNING_1,
            (timer(10), [*signal(1), wake(10 + GRACE)]),
            (timer(10 + GRACE), [*abandon(1), report(timed_out(1, "10"))]),
            (succeeded(1, s=13), []),  # whatever it reports later is dropped
        ],
    ),
    scenario(
        "a fractional timeout is written as it was set",
        [
            (poll(), [claim(3)]),
            (claimed(job(1, timeout=2.5)), [*execute(job(1, timeout=2.5), cut_off=2.5 + GRACE), wake(2.5)]),
            (timer(2.5), [*signal(1), wake(2.5 + GRACE)]),
            (raised(1, s=3), [report(timed_out(1, "2.5"))]),
        ],
    ),
    scenario(
        "a handler that ends before its timeout takes its deadline with it",
        [*RUNNING_1, (succeeded(1, s=5), [report(ok(1))]), (timer(10), [])],
    ),
    scenario(
        "a handler whose lease was lost takes its deadline with it",
        [*RUNNING_1, (beat_done(lost(1), s=5), abandon(1)), (timer(10), [])],
    ),
    scenario(
        "the timeout of an earlier Attempt does not touch the next Attempt of the same job",
        [
            *RUNNING_1,
            (succeeded(1, s=1), [report(ok(1))]),
            (reported(applied=[1], s=1), [REPOLL]),
            (poll(s=5), [claim(3)]),
            (claimed(job(1, attempt=2), s=5), [*execute(job(1, attempt=2), cut_off=15 + GRACE), wake(15)]),
            (timer(10), []),  # the first Attempt's deadline ended with it: no wake-up was asked for 10
            (timer(15), [*signal(1), wake(15 + GRACE)]),
        ],
    ),
    scenario(
        "a cut-off handler's failure joins the buffer while others still run",
        [
            (poll(), [claim(3)]),
            (
                claimed(1, job(2, timeout=100)),
                [*execute(1, job(2, timeout=100), cut_off=[12, 102]), wake(10)],
            ),
            (timer(10), [*signal(1), wake(10 + GRACE)]),
            (timer(10 + GRACE), [*abandon(1), wake(100)]),
            (succeeded(2, s=20), [report(timed_out(1, "10"), ok(2))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a cut-off handler's failure that fills the batch is flushed at once, though others still run",
        [
            (poll(), [claim(3)]),
            (
                claimed(1, job(2, timeout=100), job(3, timeout=100)),
                [
                    *execute(1, job(2, timeout=100), job(3, timeout=100), cut_off=[12, 102, 102]),
                    REPOLL,
                    wake(10),
                ],
            ),
            (raised(2, s=1), []),
            (timer(10), [*signal(1), wake(10 + GRACE)]),
            (timer(10 + GRACE), [*abandon(1), report(failed(2), timed_out(1, "10")), wake(100)]),
        ],
        max_outcome_batch=2,
    ),
]


@pytest.mark.parametrize(("dials", "script"), AT_THE_TIMEOUT)
def test_a_handler_is_stopped_at_its_timeout(dials, script):
    run(driver(**{**TEN_SECONDS, **dials}), script)


ALREADY_ASKED = [
    scenario(
        "a handler an operator asked to stop is not asked again at its timeout",
        [
            *RUNNING_1,
            (beat_done(cancel_asked(1), s=1), signal(1)),
            (timer(10), [wake(10 + GRACE)]),
            (raised(1, "JobCancelled", s=11), [report(cancelled(1))]),
            (timer(10 + GRACE), []),
        ],
    ),
    scenario(
        "a handler that ignores an operator's cancel is still cut off at the end of its timeout's grace",
        [
            *RUNNING_1,
            (beat_done(cancel_asked(1), s=1), signal(1)),
            (timer(10), [wake(10 + GRACE)]),
            (timer(10 + GRACE), [*abandon(1), report(cancelled(1))]),
            (succeeded(1, s=13), []),
        ],
    ),
    scenario(
        "a handler asked to stop by the shutdown is cut off by the shutdown, which comes first",
        [
            *RUNNING_1,
            (shutdown(grace=0, s=9), signal(1)),  # the timeout's wake-up comes first
            (timer(10), [wake(9 + WINDOW)]),
            # cut off, it takes its timeout's grace with it: the next wake-up is the final flush window's end
            (timer(9 + WINDOW), [*abandon(1), report(released(1)), wake(9 + WINDOW + FINAL)]),
            (timer(10 + GRACE), []),
            (reported(applied=[1], s=12), STOPPED),
        ],
    ),
]


@pytest.mark.parametrize(("dials", "script"), ALREADY_ASKED)
def test_the_time_limit_holds_for_a_handler_already_asked_to_stop(dials, script):
    run(driver(**{**TEN_SECONDS, **dials}), script)


DUE_ON_ANY_EVENT = [
    scenario(
        "a deadline fires on a poll that passes it, before the poll's own commands",
        [*RUNNING_1, (poll(s=10), [*signal(1), claim(3), wake(10 + GRACE)])],
    ),
    scenario(
        "a deadline fires on a heartbeat that passes it",
        [*RUNNING_1, (beat_due(s=11), [*signal(1), RUNNING, heartbeat(1), wake(10 + GRACE)])],
    ),
    scenario(
        "a deadline does not fire before its time",
        [*RUNNING_1, (poll(s=9.999), [claim(3)]), (timer(9.999), [])],
    ),
    scenario(
        "a time limit noticed late (the loop was held up) keeps only what is left of its grace",
        [
            *RUNNING_1,
            (timer(11), [*signal(1), wake(10 + GRACE)]),
            (timer(10 + GRACE), [*abandon(1), TIMED_OUT]),
        ],
    ),
    scenario(
        "deadlines passed together fire earliest first, and a grace that ran out meanwhile ends them at once",
        [
            (poll(), [claim(3)]),
            (
                claimed(job(1, timeout=5), job(2, timeout=3)),
                [*execute(job(1, timeout=5), job(2, timeout=3), cut_off=[7, 5]), wake(3)],
            ),
            (
                timer(20),
                [*signal(2, 1), *abandon(2), *abandon(1), report(timed_out(2, "3"), timed_out(1, "5"))],
            ),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "an ignored timeout is cut off by whatever event passes the grace",
        [
            *RUNNING_1,
            (timer(10), [*signal(1), wake(12)]),
            (beat_due(s=12), [*abandon(1), report(timed_out(1, "10")), RUNNING]),
        ],
    ),
]


@pytest.mark.parametrize(("dials", "script"), DUE_ON_ANY_EVENT)
def test_deadlines_fire_on_any_event_whose_time_passes_them(dials, script):
    run(driver(**{**TEN_SECONDS, **dials}), script)


def test_a_timer_with_nothing_due_does_nothing():
    run(driver(), [(timer(0), []), (timer(100), [])])
