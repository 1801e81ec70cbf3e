"""The Driver's deadlines: a min-heap that hands back what is due, earliest first, and forgets an Attempt's
deadlines when the Attempt ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backwave_django.core.deadlines import COMPACT_SLACK, Deadline, Deadlines, Kind

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def due(deadlines: Deadlines, now: datetime) -> list[Deadline]:
    fired = []
    while (deadline := deadlines.pop_due(now)) is not None:
        fired.append(deadline)
    return fired


def test_no_deadline_means_nothing_due_and_no_earliest():
    deadlines = Deadlines()
    assert (due(deadlines, at(10**6)), deadlines.earliest) == ([], None)


def test_what_is_due_comes_back_earliest_first_and_leaves_the_heap():
    deadlines = Deadlines()
    deadlines.add(at(30), Kind.GRACE)
    deadlines.add(at(10), Kind.TIMEOUT, job_id=7, attempt=2)
    deadlines.add(at(20), Kind.ABANDON, job_id=8, attempt=1)
    assert deadlines.earliest == at(10)

    fired = due(deadlines, at(20))
    assert [(d.at, d.kind, d.job_id, d.attempt) for d in fired] == [
        (at(10), Kind.TIMEOUT, 7, 2),
        (at(20), Kind.ABANDON, 8, 1),
    ]
    assert deadlines.earliest == at(30)
    assert due(deadlines, at(20)) == []


def test_a_deadline_is_due_at_its_time_not_before():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.CUT_OFF)
    assert due(deadlines, at(9.999_999)) == []
    assert [d.kind for d in due(deadlines, at(10))] == [Kind.CUT_OFF]


def test_deadlines_at_the_same_time_come_back_in_the_order_they_were_added():
    deadlines = Deadlines()
    for kind in (Kind.GIVE_UP, Kind.TIMEOUT, Kind.CUT_OFF):
        deadlines.add(at(5), kind)
    assert [d.kind for d in due(deadlines, at(5))] == [Kind.GIVE_UP, Kind.TIMEOUT, Kind.CUT_OFF]


def test_an_earlier_deadline_added_later_becomes_the_earliest():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.TIMEOUT, job_id=1)
    deadlines.add(at(3), Kind.TIMEOUT, job_id=2)
    assert deadlines.earliest == at(3)


def test_deadlines_order_by_time_then_by_when_they_were_added_never_by_what_they_are_for():
    assert Deadline(at(1), 5, Kind.GIVE_UP) < Deadline(at(2), 0, Kind.TIMEOUT)
    assert Deadline(at(1), 0, Kind.GIVE_UP) < Deadline(at(1), 1, Kind.TIMEOUT)
    deadlines = Deadlines()
    for kind in (Kind.GIVE_UP, Kind.TIMEOUT, Kind.ABANDON):
        deadlines.add(at(1), kind, job_id=1, attempt=1)
    assert [d.seq for d in due(deadlines, at(1))] == [0, 1, 2]


def test_an_attempt_that_ends_takes_its_deadlines_with_it():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.TIMEOUT, job_id=7, attempt=1)
    deadlines.add(at(20), Kind.ABANDON, job_id=7, attempt=1)
    deadlines.add(at(15), Kind.TIMEOUT, job_id=8, attempt=1)
    deadlines.end(7, 1)
    # The ended Attempt's deadline at the top went at once: the earliest is the next one that applies.
    assert deadlines.earliest == at(15)
    assert [(d.job_id, d.kind) for d in due(deadlines, at(100))] == [(8, Kind.TIMEOUT)]
    assert (len(deadlines), deadlines.earliest) == (0, None)


def test_ending_one_attempt_leaves_the_next_attempt_of_the_same_job_alone():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.TIMEOUT, job_id=7, attempt=1)
    deadlines.add(at(12), Kind.TIMEOUT, job_id=7, attempt=2)
    deadlines.end(7, 1)
    assert [(d.job_id, d.attempt) for d in due(deadlines, at(100))] == [(7, 2)]


def test_ending_an_attempt_leaves_the_shutdown_deadlines_alone():
    # The shutdown's deadlines carry job id 0 and attempt 0; no Attempt's end touches them.
    deadlines = Deadlines()
    deadlines.add(at(5), Kind.GRACE)
    deadlines.add(at(6), Kind.CUT_OFF)
    deadlines.add(at(7), Kind.GIVE_UP)
    deadlines.end(0, 0)
    assert [d.kind for d in due(deadlines, at(10))] == [Kind.GRACE, Kind.CUT_OFF, Kind.GIVE_UP]


def test_ending_an_attempt_with_no_deadlines_or_one_already_fired_changes_nothing():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.TIMEOUT, job_id=7, attempt=1)
    deadlines.end(99, 1)
    assert [d.job_id for d in due(deadlines, at(10))] == [7]
    deadlines.end(7, 1)  # its only deadline already fired
    deadlines.add(at(20), Kind.TIMEOUT, job_id=7, attempt=1)  # (the Driver never does this; the heap copes)
    assert [d.job_id for d in due(deadlines, at(20))] == [7]


def test_an_ended_attempt_deep_in_the_heap_is_skipped_when_it_reaches_the_top():
    deadlines = Deadlines()
    deadlines.add(at(1), Kind.TIMEOUT, job_id=1, attempt=1)
    deadlines.add(at(2), Kind.TIMEOUT, job_id=2, attempt=1)
    deadlines.add(at(3), Kind.TIMEOUT, job_id=3, attempt=1)
    deadlines.end(2, 1)
    assert len(deadlines) == 3  # still in the heap: not at the top
    assert [d.job_id for d in due(deadlines, at(10))] == [1, 3]
    assert len(deadlines) == 0


def test_what_firing_one_deadline_ends_is_not_handed_out_after_it():
    # A cut-off and a time limit both passed while the loop was held up: the cut-off ends every Attempt,
    # so the time limit behind it must not come out.
    deadlines = Deadlines()
    deadlines.add(at(5), Kind.CUT_OFF)
    deadlines.add(at(6), Kind.TIMEOUT, job_id=7, attempt=1)
    assert deadlines.pop_due(at(10)).kind is Kind.CUT_OFF
    deadlines.end(7, 1)
    assert deadlines.pop_due(at(10)) is None


def test_the_heap_stays_bounded_when_attempts_end_long_before_their_deadlines():
    # A pump that finishes jobs in milliseconds under a 30-minute limit: none of the limits ever comes due.
    deadlines = Deadlines()
    for job_id in range(1, 10_001):
        deadlines.add(at(1800 + job_id), Kind.TIMEOUT, job_id=job_id, attempt=1)
        if job_id > 10:  # ten stay running
            deadlines.end(job_id - 10, 1)
    assert len(deadlines) <= 2 * 10 + COMPACT_SLACK + 1
    assert [d.job_id for d in due(deadlines, at(10**6))] == list(range(9_991, 10_001))
    assert len(deadlines) == 0


def test_an_attempt_with_two_deadlines_ends_both_even_when_one_is_compacted_away():
    deadlines = Deadlines()
    deadlines.add(at(1), Kind.TIMEOUT, job_id=1, attempt=1)
    deadlines.add(at(2), Kind.ABANDON, job_id=1, attempt=1)
    for job_id in range(2, COMPACT_SLACK + 10):
        deadlines.add(at(100), Kind.TIMEOUT, job_id=job_id, attempt=1)
        deadlines.end(job_id, 1)
    deadlines.end(1, 1)
    assert len(deadlines) <= COMPACT_SLACK + 1
    assert due(deadlines, at(10**6)) == []


def test_the_attempts_whose_deadlines_still_apply_leave_out_ended_ones_and_the_shutdown():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.TIMEOUT, job_id=7, attempt=1)
    deadlines.add(at(20), Kind.TIMEOUT, job_id=8, attempt=2)
    deadlines.add(at(30), Kind.GRACE)
    deadlines.end(8, 2)
    assert deadlines.attempts() == {(7, 1)}
