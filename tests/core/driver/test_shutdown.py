"""Shutdown: stop claiming, let handlers finish for the grace, ask them to stop, cut off those that do not,
give their jobs back, drop what still cannot be written, then stop."""

from __future__ import annotations

import pytest

from backwave_django.core.driver import FINAL_FLUSH_WINDOW, STOP_WINDOW, TIMEOUT_GRACE

from .helpers import (
    EVERY_EVENT,
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
    degraded,
    driver,
    execute,
    failed,
    fault,
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
    shutdown,
    signal,
    succeeded,
    timer,
    wake,
    weighted,
)

WINDOW = STOP_WINDOW.total_seconds()
FINAL = FINAL_FLUSH_WINDOW.total_seconds()
GRACE = TIMEOUT_GRACE.total_seconds()

DRAIN = [
    scenario(
        "shutdown flushes, stops claiming and waits for running jobs",
        [
            (poll(), [claim(3)]),
            (claimed(1, 2, 3), [*execute(1, 2, 3), REPOLL]),
            (succeeded(1), []),
            (shutdown(grace=30), [report(ok(1)), wake(30)]),
            (poll(), []),
            (succeeded(2), [report(ok(2))]),  # while draining, every result is written at once
            (reported(applied=[1]), []),  # and no re-poll
            (beat_due(), [RUNNING, heartbeat(3)]),
            (raised(3), [report(failed(3))]),
            (reported(applied=[2]), []),
            (reported(applied=[3]), STOPPED),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a claim in flight at shutdown still runs its jobs",
        [
            (poll(), [claim(3)]),
            (shutdown(grace=30), [wake(30)]),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1]), STOPPED),
        ],
    ),
    scenario(
        "an empty claim completing during shutdown lets the driver stop",
        [(poll(), [claim(3)]), (shutdown(grace=30), [wake(30)]), (claimed(), STOPPED)],
    ),
    scenario(
        "a failed claim completing during shutdown lets the driver stop",
        [(poll(), [claim(3)]), (shutdown(grace=30), [wake(30)]), (claimed(failed=True), STOPPED)],
    ),
    scenario(
        "shutdown drops the rest of a weighted pass",
        [
            (poll(), [claim(2, ("a", "b"))]),
            (shutdown(grace=30), [wake(30)]),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(stale=[1]), STOPPED),
        ],
        policy=weighted(("a", 2), ("b", 1)),
        pool_size=3,
    ),
    scenario(
        "a lease lost during shutdown can complete the drain",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=30), [wake(30)]),
            (beat_done(lost(1)), [*abandon(1), *STOPPED]),
        ],
    ),
    scenario(
        "a write that fails during shutdown is written again by the next poll",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=30), [wake(30)]),
            (succeeded(1), [report(ok(1))]),
            (reported(failed=True), []),
            (poll(), [report(ok(1))]),
            (reported(applied=[1]), STOPPED),
        ],
    ),
    scenario(
        "a second shutdown request that would end the grace later changes nothing",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=5), [wake(5)]),
            (shutdown(grace=30, s=1), []),
            (timer(5), [*signal(1), wake(5 + WINDOW)]),
        ],
    ),
    scenario(
        "a second shutdown request brings the grace's end earlier (a node stopping a Pump that lets go)",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=30), [wake(30)]),
            (shutdown(grace=5, s=1), [wake(6)]),
            (timer(6), [*signal(1), wake(6 + WINDOW)]),
        ],
    ),
    scenario(
        "a second shutdown request with no grace asks every handler to stop at once",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=30), [wake(30)]),
            (shutdown(grace=0, s=1), [*signal(1), wake(1 + WINDOW)]),
            (shutdown(grace=0, s=2), []),  # the grace is over: nothing is asked twice
        ],
    ),
    scenario(
        "the first request's grace, passed after a second one ended it, asks nothing again",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=30), [wake(30)]),
            (shutdown(grace=0, s=1), [*signal(1), wake(1 + WINDOW)]),
            (raised(1, "JobCancelled", s=2), [report(released(1))]),
            (reported(failed=True, s=2), []),
            (poll(s=31), [report(released(1)), wake(31 + FINAL)]),  # the cut-off's final window begins
            (reported(applied=[1], s=31), STOPPED),
        ],
    ),
]


@pytest.mark.parametrize(("dials", "script"), DRAIN)
def test_shutdown_drains_then_stops(dials, script):
    run(driver(**dials), script)


RUNNING_1_2 = [(poll(), [claim(3)]), (claimed(1, 2), execute(1, 2))]
GRACE_OVER = 30 + WINDOW

AFTER_THE_GRACE = [
    scenario(
        "at the grace every handler still running is asked to stop",
        [
            *RUNNING_1_2,
            (shutdown(grace=30), [wake(30)]),
            (timer(30), [*signal(1, 2), wake(GRACE_OVER)]),
        ],
    ),
    scenario(
        "a handler that stops when asked gives its job back",
        [
            *RUNNING_1_2,
            (shutdown(grace=30), [wake(30)]),
            (timer(30), [*signal(1, 2), wake(GRACE_OVER)]),
            (raised(1, "JobCancelled", s=31), [report(released(1))]),
            (succeeded(2, s=31), [report(ok(2))]),
            (reported(applied=[1], s=31), []),
            (reported(applied=[2], s=31), STOPPED),
        ],
    ),
    scenario(
        "a handler that does not stop within the window is cut off and its job given back",
        [
            *RUNNING_1_2,
            (shutdown(grace=30), [wake(30)]),
            (timer(30), [*signal(1, 2), wake(GRACE_OVER)]),
            (
                timer(GRACE_OVER),
                [*abandon(1), *abandon(2), report(released(1), released(2)), wake(GRACE_OVER + FINAL)],
            ),
            (succeeded(1, s=33), []),  # cut off: whatever it reports is dropped
            (reported(applied=[1, 2], s=33), STOPPED),
        ],
    ),
    scenario(
        "a handler an operator asked to stop is not asked again, and is cancelled when cut off",
        [
            *RUNNING_1_2,
            (beat_done(cancel_asked(1)), signal(1)),
            (shutdown(grace=30), [wake(30)]),
            (timer(30), [*signal(2), wake(GRACE_OVER)]),
            (
                timer(GRACE_OVER),
                [*abandon(1), *abandon(2), report(cancelled(1), released(2)), wake(GRACE_OVER + FINAL)],
            ),
        ],
    ),
    scenario(
        "a zero grace asks every handler to stop at once",
        [*RUNNING_1_2, (shutdown(grace=0, s=5), [*signal(1, 2), wake(5 + WINDOW)])],
    ),
    scenario(
        "a negative grace counts as none",
        [*RUNNING_1_2, (shutdown(grace=-5, s=5), [*signal(1, 2), wake(5 + WINDOW)])],
    ),
    scenario(
        "the grace fires on whatever event passes it, and the stop window counts from the grace's end",
        [
            *RUNNING_1_2,
            (shutdown(grace=30), [wake(30)]),
            (beat_due(s=31), [*signal(1, 2), RUNNING, heartbeat(1, 2), wake(30 + WINDOW)]),
        ],
    ),
    scenario(
        "a loop held up past the grace and the stop window cuts its handlers off as soon as it goes on",
        [
            *RUNNING_1_2,
            (shutdown(grace=1), [wake(1)]),
            (timer(10), [*signal(1, 2), *abandon(1, 2), report(released(1), released(2)), wake(10 + FINAL)]),
        ],
    ),
    scenario(
        "a time limit passed behind the cut-off, while the loop was held up, does not fire for a handler the "
        "cut-off already ended",
        [
            (poll(), [claim(3)]),
            (claimed(job(1, timeout=8)), [*execute(job(1, timeout=8), cut_off=8 + GRACE), wake(8)]),
            (shutdown(grace=1), [wake(1)]),
            (timer(20), [*signal(1), *abandon(1), report(released(1)), wake(20 + FINAL)]),
            (reported(applied=[1], s=20), STOPPED),
        ],
    ),
]


@pytest.mark.parametrize(("dials", "script"), AFTER_THE_GRACE)
def test_after_the_grace_handlers_are_asked_to_stop_then_cut_off(dials, script):
    run(driver(**dials), script)


LATE_CLAIMS = [
    scenario(
        "jobs claimed after the grace are given straight back, never run: every handler was asked to stop",
        [
            (poll(), [claim(3)]),
            (shutdown(grace=0), [wake(WINDOW)]),
            (claimed(1, 2, s=1), [report(released(1), released(2))]),
            (reported(applied=[1, 2], s=1), STOPPED),
        ],
    ),
    scenario(
        "jobs claimed after the grace are given back while the handlers asked to stop finish",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (poll(), [claim(3)]),
            (shutdown(grace=0), [*signal(1), wake(WINDOW)]),
            (claimed(2, s=1), [report(released(2))]),
            (raised(1, "JobCancelled", s=1), [report(released(1))]),
            (reported(applied=[2], s=1), []),
            (reported(applied=[1], s=1), STOPPED),
        ],
    ),
    scenario(
        "jobs claimed during the grace still run",
        [
            (poll(), [claim(3)]),
            (shutdown(grace=30), [wake(30)]),
            (claimed(1, s=29), execute(1)),
            (timer(30), [*signal(1), wake(30 + WINDOW)]),
        ],
    ),
    scenario(
        "jobs claimed after the cut-off are given straight back, never run",
        [
            (poll(), [claim(3)]),
            (shutdown(grace=0), [wake(WINDOW)]),
            (timer(WINDOW), [wake(WINDOW + FINAL)]),  # the claim is still in flight
            (claimed(1, 2, s=3), [report(released(1), released(2))]),
            (reported(applied=[1, 2], s=3), STOPPED),
        ],
    ),
    scenario(
        "an empty claim landing after the cut-off lets the driver stop",
        [
            (poll(), [claim(3)]),
            (shutdown(grace=0), [wake(WINDOW)]),
            (timer(WINDOW), [wake(WINDOW + FINAL)]),
            (claimed(s=3), STOPPED),
        ],
    ),
    scenario(
        "a failed claim landing after the cut-off lets the driver stop",
        [
            (poll(), [claim(3)]),
            (shutdown(grace=0), [wake(WINDOW)]),
            (timer(WINDOW), [wake(WINDOW + FINAL)]),
            (claimed(failed=True, s=3), STOPPED),
        ],
    ),
    scenario(
        "a claim landing after the cut-off waits for the outcome report in flight too",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (poll(), [claim(3)]),
            (succeeded(1), [report(ok(1))]),
            (shutdown(grace=0), [wake(WINDOW)]),  # nothing runs, but a claim and a report are in flight
            (timer(WINDOW), [wake(WINDOW + FINAL)]),
            (claimed(2, s=3), [report(released(2))]),
            (reported(applied=[1], s=3), []),
            (reported(applied=[2], s=3), STOPPED),
        ],
    ),
    scenario(
        "a weighted pass is not continued after the cut-off",
        [
            (poll(), [claim(2, ("a", "b"))]),
            (shutdown(grace=0), [wake(WINDOW)]),
            (timer(WINDOW), [wake(WINDOW + FINAL)]),
            (claimed(1, 2, s=3), [report(released(1), released(2))]),  # no follow-up claim for b
            (poll(s=3), []),
            (reported(applied=[1, 2], s=3), STOPPED),
        ],
        policy=weighted(("a", 2), ("b", 1)),
        pool_size=3,
    ),
]


@pytest.mark.parametrize(("dials", "script"), LATE_CLAIMS)
def test_jobs_claimed_after_the_grace_are_given_back_unrun(dials, script):
    run(driver(**dials), script)


def test_outcomes_that_still_cannot_be_written_are_dropped_after_the_final_flush_window():
    node = driver()
    run(
        node,
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=0), [*signal(1), wake(WINDOW)]),
            (raised(1, "JobCancelled", s=1), [report(released(1))]),
            (fault(s=1), [degraded()]),
            (reported(failed=True, s=1), []),
            (timer(WINDOW), [report(released(1)), wake(WINDOW + FINAL)]),  # the cut-off flushes
            (fault(s=2), []),
            (reported(failed=True, s=2), []),
            (poll(s=5), [report(released(1))]),
            (fault(s=5), []),
            (reported(failed=True, s=5), []),
            (timer(WINDOW + FINAL), STOPPED),  # their leases lapse; the sweep counts those Attempts
        ],
    )
    assert not node.buffer


def test_a_batch_in_flight_when_the_final_flush_window_passes_is_dropped_if_its_write_fails():
    """The store call outlasts the window: its failure must not put the batch back, or the Pump would retry
    it for as long as the store stays down, and never stop."""
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (shutdown(grace=0), [*signal(1), wake(WINDOW)]),
            (raised(1, "JobCancelled", s=1), [report(released(1))]),
            (fault(s=1), [degraded()]),
            (reported(failed=True, s=1), []),
            (timer(WINDOW), [report(released(1)), wake(WINDOW + FINAL)]),
            (fault(s=WINDOW + FINAL + 1), []),  # the window passed while the write hung
            (reported(failed=True, s=WINDOW + FINAL + 1), STOPPED),
        ],
    )


def test_a_late_claim_given_back_after_the_final_flush_window_is_dropped_if_its_write_fails():
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (shutdown(grace=0), [wake(WINDOW)]),
            (timer(WINDOW), [wake(WINDOW + FINAL)]),
            (timer(WINDOW + FINAL), []),
            (claimed(1, s=20), [report(released(1))]),
            (fault(s=20), [degraded()]),
            (reported(failed=True, s=20), STOPPED),
        ],
    )


def test_the_final_flush_window_waits_for_claims_still_in_flight():
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (shutdown(grace=0), [wake(WINDOW)]),
            (timer(WINDOW), [wake(WINDOW + FINAL)]),
            (timer(WINDOW + FINAL), []),
            (claimed(1, s=20), [report(released(1))]),
            (reported(applied=[1], s=20), STOPPED),
        ],
    )


@pytest.mark.parametrize("grace", [30, 0], ids=["a grace", "no grace"])
def test_a_driver_with_nothing_held_stops_at_once_and_says_so_once(grace):
    run(driver(), [(shutdown(grace=grace), STOPPED)])


def test_deadlines_passed_together_stop_the_driver_once():
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (shutdown(grace=1), [wake(1)]),
            (claimed(s=60), STOPPED),  # the grace and the cut-off both passed: each would stop it
        ],
    )


def test_a_deadline_that_ends_the_drain_ends_the_step_too():
    """The final flush window passes on a heartbeat tick: the Driver stops, and the tick, which comes after
    the Stop, records no status over the "stopped" one."""
    run(
        driver(),
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (succeeded(1), [report(ok(1))]),
            (fault(), [degraded()]),
            (reported(failed=True), []),
            (shutdown(grace=0), [wake(WINDOW)]),  # backing off: no write yet
            (poll(s=0.1), [report(ok(1))]),  # a poll past the backoff writes, and fails again
            (fault(s=0.1), []),
            (reported(failed=True, s=0.1), []),
            (timer(WINDOW), [report(ok(1)), wake(WINDOW + FINAL)]),  # the cut-off flushes
            (fault(s=WINDOW), []),
            (reported(failed=True, s=WINDOW), []),
            (beat_due(s=WINDOW + FINAL), STOPPED),
        ],
    )


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_after_stop_every_event_is_ignored(event):
    node = driver()
    run(
        node,
        [(poll(), [claim(3)]), (claimed(1), execute(1)), (shutdown(grace=0), [*signal(1), wake(WINDOW)])],
    )
    run(node, [(raised(1, "JobCancelled"), [report(released(1))]), (reported(applied=[1]), STOPPED)])
    assert node.stopped
    assert node.step(event) == []
