"""The Driver's deadlines: a min-heap that hands back what is due, earliest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backwave_django.core.deadlines import Deadline, Deadlines, Kind

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_no_deadline_means_nothing_due_and_no_earliest():
    deadlines = Deadlines()
    assert (deadlines.due(at(10**6)), deadlines.earliest) == ([], None)


def test_what_is_due_comes_back_earliest_first_and_leaves_the_heap():
    deadlines = Deadlines()
    deadlines.add(at(30), Kind.GRACE)
    deadlines.add(at(10), Kind.TIMEOUT, job_id=7, attempt=2)
    deadlines.add(at(20), Kind.ABANDON, job_id=8, attempt=1)
    assert deadlines.earliest == at(10)

    due = deadlines.due(at(20))
    assert [(d.at, d.kind, d.job_id, d.attempt) for d in due] == [
        (at(10), Kind.TIMEOUT, 7, 2),
        (at(20), Kind.ABANDON, 8, 1),
    ]
    assert deadlines.earliest == at(30)
    assert deadlines.due(at(20)) == []


def test_a_deadline_is_due_at_its_time_not_before():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.CUT_OFF)
    assert deadlines.due(at(9.999_999)) == []
    assert [d.kind for d in deadlines.due(at(10))] == [Kind.CUT_OFF]


def test_deadlines_at_the_same_time_come_back_in_the_order_they_were_added():
    deadlines = Deadlines()
    for kind in (Kind.GIVE_UP, Kind.TIMEOUT, Kind.CUT_OFF):
        deadlines.add(at(5), kind)
    assert [d.kind for d in deadlines.due(at(5))] == [Kind.GIVE_UP, Kind.TIMEOUT, Kind.CUT_OFF]


def test_an_earlier_deadline_added_later_becomes_the_earliest():
    deadlines = Deadlines()
    deadlines.add(at(10), Kind.TIMEOUT, job_id=1)
    deadlines.add(at(3), Kind.TIMEOUT, job_id=2)
    assert deadlines.earliest == at(3)


def test_deadlines_order_by_time_then_by_when_they_were_added_never_by_what_they_are_for():
    assert Deadline(at(1), 5, Kind.GIVE_UP) < Deadline(at(2), 0, Kind.TIMEOUT)
    assert Deadline(at(1), 0, Kind.GIVE_UP) < Deadline(at(1), 1, Kind.TIMEOUT)
    assert Deadline(at(1), 0, Kind.GIVE_UP, job_id=1) == Deadline(at(1), 0, Kind.TIMEOUT, job_id=2)
