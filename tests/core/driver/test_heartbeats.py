"""Heartbeats: the status record, renewing leases (of running jobs and of unwritten outcomes), lost leases and
operator cancels."""

from __future__ import annotations

import pytest

from .helpers import (
    REPOLL,
    RUNNING,
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
    renewed,
    report,
    reported,
    run,
    scenario,
    signal,
    succeeded,
)

RUNNING_1_2 = [(poll(), [claim(3)]), (claimed(1, 2), execute(1, 2))]

HEARTBEATS = [
    scenario("with nothing held, a heartbeat only records the status", [(beat_due(), [RUNNING])]),
    scenario(
        "a heartbeat records the status, then renews every running job",
        [*RUNNING_1_2, (beat_due(), [RUNNING, heartbeat(1, 2)])],
    ),
    scenario(
        "a lost lease abandons the execution, drops its result and frees its slot",
        [
            *RUNNING_1_2,
            (beat_due(), [RUNNING, heartbeat(1, 2)]),
            (beat_done(lost(1), renewed(2)), abandon(1)),
            (succeeded(1), []),
            (beat_due(), [RUNNING, heartbeat(2)]),
            (poll(), [claim(3)]),
        ],
    ),
    scenario(
        "a cancel request is signalled exactly once, and the failure that follows is a cancellation",
        [
            *RUNNING_1_2,
            (beat_done(cancel_asked(1), renewed(2)), signal(1)),
            (beat_done(cancel_asked(1), renewed(2)), []),
            (raised(1, "JobCancelled"), []),
            (succeeded(2), [report(cancelled(1), ok(2))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a lease lost after a cancel signal is still abandoned",
        [
            *RUNNING_1_2,
            (beat_done(cancel_asked(1)), signal(1)),
            (beat_done(lost(1)), abandon(1)),
            (raised(1, "JobCancelled"), []),
        ],
    ),
    scenario(
        "the next Attempt of a cancelled job can be signalled again",
        [
            (poll(), [claim(3)]),
            (claimed(1), execute(1)),
            (beat_done(cancel_asked(1)), signal(1)),
            (succeeded(1), [report(ok(1))]),
            (reported(applied=[1]), [REPOLL]),
            (poll(), [claim(3)]),
            (claimed(job(1, attempt=2)), execute(job(1, attempt=2))),
            (beat_done(cancel_asked(1)), signal(1)),
        ],
    ),
    scenario(
        "a cancel request for a job that finished while the heartbeat was in flight is ignored",
        [
            *RUNNING_1_2,
            (beat_due(), [RUNNING, heartbeat(1, 2)]),
            (succeeded(1), []),
            (beat_done(cancel_asked(1), renewed(2)), []),
            (succeeded(2), [report(ok(1), ok(2))]),
        ],
        max_outcome_batch=10,
    ),
    scenario(
        "a job that finished while its heartbeat was in flight and lost its lease loses its outcome",
        [
            *RUNNING_1_2,
            (beat_due(), [RUNNING, heartbeat(1, 2)]),
            (succeeded(1), []),
            (beat_done(lost(1), renewed(2)), []),  # the write would be fenced off: drop it
            (succeeded(2), [report(ok(2))]),
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
        [*RUNNING_1_2, (beat_done(failed=True), []), (beat_due(), [RUNNING, heartbeat(1, 2)])],
    ),
]


@pytest.mark.parametrize(("dials", "script"), HEARTBEATS)
def test_heartbeat_results_abandon_lost_jobs_and_signal_cancels(dials, script):
    run(driver(**dials), script)


# -- outcomes that cannot be written yet keep their leases -------------------------------------------------


def _outcome_of_1_unwritten():
    """Jobs 1 and 2 run; 1 succeeded, but its report failed and the store is backing off (until 0.1 s)."""
    node = driver()
    run(
        node,
        [
            *RUNNING_1_2,
            (succeeded(1), []),
            (beat_due(), [RUNNING, report(ok(1)), heartbeat(2)]),
            (fault(), [degraded()]),
            (reported(failed=True), []),
        ],
    )
    return node


def test_a_heartbeat_renews_the_leases_of_outcomes_not_yet_written():
    node = _outcome_of_1_unwritten()
    # still backing off: the heartbeat does not write the outcome, but keeps its lease alive
    run(node, [(beat_due(s=0.05), [degraded(), heartbeat(2, 1)])])


def test_an_unwritten_outcome_whose_lease_was_renewed_is_kept():
    node = _outcome_of_1_unwritten()
    run(
        node,
        [
            (beat_due(s=0.05), [degraded(), heartbeat(2, 1)]),
            (beat_done(renewed(2), renewed(1), s=0.06), [RUNNING]),  # a store reply: it is back
            (succeeded(2, s=0.07), [report(ok(1), ok(2))]),
        ],
    )


def test_an_unwritten_outcome_whose_lease_was_not_renewed_is_dropped():
    node = _outcome_of_1_unwritten()
    run(
        node,
        [
            (beat_due(s=0.05), [degraded(), heartbeat(2, 1)]),
            (beat_done(renewed(2), lost(1), s=0.06), [RUNNING]),
            (succeeded(2, s=0.07), [report(ok(2))]),
        ],
    )
    assert node.occupied == 1


def test_with_only_unwritten_outcomes_left_a_renewing_heartbeat_flushes_them():
    node = _outcome_of_1_unwritten()
    run(
        node,
        [
            (beat_done(lost(2), s=0.05), [RUNNING, *abandon(2), report(ok(1))]),
            (reported(applied=[1], s=0.06), [REPOLL]),
        ],
    )


def test_a_failed_heartbeat_with_nothing_running_does_not_write_outcomes_during_the_backoff():
    node = _outcome_of_1_unwritten()
    run(
        node,
        [
            (raised(2, s=0.01), []),  # nothing runs now; the store is still backing off: no write yet
            (beat_due(s=0.05), [degraded(), heartbeat(1, 2)]),
            (beat_done(failed=True, s=0.06), []),  # the drain-tail flush waits out the backoff too
            (poll(s=0.2), [report(ok(1), failed(2)), claim(2)]),
        ],
    )
