"""``job_transitioned`` from every store: one signal per state change, after commit, with job id, wire name,
queue, from and to states, Attempt and cause; nothing for a change that did not happen (a stale report, a
cancel of a running job, a rolled-back transaction); a receiver that raises is logged and breaks nothing;
with no receiver, nothing is built."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import transaction

from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import State
from backwave_django.signals import job_transitioned
from backwave_django.store import announced

from ..conftest import LEASE, T0
from .support import (
    OTHER_WORKER,
    WORKER,
    claim_one,
    enqueue,
    enqueue_one,
    outcome,
    report,
    state_of,
    sweep,
)

# Real transactions: the Django stores send at commit, and a test's usual outer transaction never commits.
pytestmark = pytest.mark.django_db(transaction=True)

LATER = T0 + timedelta(seconds=5)


@pytest.fixture
def heard():
    """The keyword arguments of every job_transitioned sent while the test runs, in order."""
    got: list[dict] = []

    def receiver(sender, **kwargs):
        got.append(kwargs)

    job_transitioned.connect(receiver, dispatch_uid="tests.heard")
    yield got
    job_transitioned.disconnect(dispatch_uid="tests.heard")


def moves(heard, job_id=None):
    return [
        (h["operation"], h["from_state"], h["to_state"], h["attempt"])
        for h in heard
        if job_id is None or h["job_id"] == job_id
    ]


def test_a_jobs_whole_life_is_announced_change_by_change(store, heard):
    new = enqueue_one(store, wire_name="tests.life", queue="emails", max_attempts=3)
    first = claim_one(store, queues=["emails"], now=T0)
    report(store, outcome(first, OutcomeKind.FAILED, message="Boom: no"), now=T0)
    second = claim_one(store, queues=["emails"], now=T0 + timedelta(seconds=2))
    report(store, outcome(second, OutcomeKind.SUCCEEDED), now=T0 + timedelta(seconds=3))

    assert moves(heard) == [
        ("enqueue", None, State.SCHEDULED, 0),
        ("claim", State.SCHEDULED, State.LEASED, 1),
        ("report", State.LEASED, State.SCHEDULED, 1),
        ("claim", State.SCHEDULED, State.LEASED, 2),
        ("report", State.LEASED, State.SUCCEEDED, 2),
    ]
    assert {(h["job_id"], h["wire_name"], h["queue"]) for h in heard} == {(new.id, "tests.life", "emails")}
    assert [h["cause"] for h in heard] == ["", f"claimed by {WORKER}", "Boom: no", f"claimed by {WORKER}", ""]
    assert all(h["transition"].job_id == h["job_id"] for h in heard)


def test_a_batch_is_announced_job_by_job_in_order(store, heard):
    done = enqueue(store, 3)
    assert [h["job_id"] for h in heard] == [d.id for d in done]


def test_an_expired_lease_and_a_dead_letter_are_announced_with_their_causes(store, heard):
    new = enqueue_one(store, max_attempts=1)
    claim_one(store, now=T0)
    sweep(store, now=T0 + LEASE)
    assert moves(heard)[-1] == ("expire", State.LEASED, State.DEAD_LETTERED, 1)
    assert heard[-1]["cause"] == "lease expired on attempt 1 (ceiling reached)"

    assert store.requeue(new.id, actor="ops", now=LATER) == "requeued"
    assert moves(heard)[-1] == ("requeue", State.DEAD_LETTERED, State.SCHEDULED, 0)
    assert heard[-1]["cause"] == "requeued by ops"


def test_a_cancel_is_announced_when_it_moves_the_job_and_only_then(store, heard):
    waiting = enqueue_one(store, due_at=T0 + timedelta(hours=1))
    running = enqueue_one(store)
    leased = claim_one(store, now=T0)
    assert leased.id == running.id
    heard.clear()

    store.cancel(waiting.id, actor="ops", now=LATER)
    store.cancel(running.id, actor="ops", now=LATER)  # a request: it stays leased until its handler stops
    assert moves(heard) == [("cancel", State.SCHEDULED, State.CANCELLED, 0)]
    assert heard[0]["cause"] == "cancelled by ops"

    report(store, outcome(leased, OutcomeKind.FAILED, message="stopped"), now=LATER)
    assert moves(heard)[-1] == ("report", State.LEASED, State.CANCELLED, 1)  # the move for the flag it read


def test_a_stale_report_announces_nothing(store, heard):
    enqueue_one(store)
    stale = claim_one(store, now=T0)
    sweep(store, now=T0 + LEASE)
    claim_one(store, worker=OTHER_WORKER, now=T0 + LEASE + timedelta(seconds=10))
    heard.clear()

    result = report(store, outcome(stale, OutcomeKind.SUCCEEDED), now=T0 + LEASE + timedelta(seconds=20))

    assert result.applied == frozenset() and heard == []


def test_a_receiver_that_raises_is_logged_and_breaks_nothing(store, heard, caplog):
    def broken(sender, **kwargs):
        raise RuntimeError("receiver bug")

    job_transitioned.connect(broken, dispatch_uid="tests.broken")
    try:
        with caplog.at_level(logging.ERROR, logger="backwave.signals"):
            new = enqueue_one(store)
            leased = claim_one(store, now=T0)
            result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=LATER)
    finally:
        job_transitioned.disconnect(dispatch_uid="tests.broken")

    assert result.applied == {new.id} and state_of(store, new.id) is State.SUCCEEDED
    assert len(heard) == 3  # the other receiver heard every change
    logged = [r for r in caplog.records if r.name == "backwave.signals"]
    assert len(logged) == 3 and "the change stands" in logged[0].getMessage()


def test_with_no_receiver_nothing_is_built(store, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a transition was built with no receiver connected")

    for name in ("births", "claims", "endings", "Transition"):
        monkeypatch.setattr(announced, name, refuse)
    new = enqueue_one(store, max_attempts=1)
    leased = claim_one(store, now=T0)
    report(store, outcome(leased, OutcomeKind.FAILED, message="x"), now=LATER)
    store.requeue(new.id, actor="ops", now=LATER)
    store.cancel(new.id, actor="ops", now=LATER)
    assert state_of(store, new.id) is State.CANCELLED


def test_a_rolled_back_transaction_announces_nothing_and_a_committed_one_at_its_commit(db_store, heard):
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue_one(db_store)
        assert heard == []  # not yet: the caller's transaction is open
        raise RuntimeError("the caller changes its mind")
    assert heard == []

    with transaction.atomic():
        new = enqueue_one(db_store)
        assert heard == []
    assert moves(heard) == [("enqueue", None, State.SCHEDULED, 0)] and heard[0]["job_id"] == new.id


def test_jobs_a_schedule_mints_or_an_operator_triggers_are_announced_as_births(store, heard):
    from .test_schedules import HOUR, decide, definition

    store.sync_schedules([definition()], now=T0)
    assert store.mint([decide((T0 + HOUR, T0 + 2 * HOUR))], now=T0 + 2 * HOUR) == 2
    store.trigger_schedule("hourly", actor="ops", now=T0 + 3 * HOUR)

    assert [(h["operation"], h["from_state"], h["to_state"]) for h in heard] == [
        ("mint", None, State.SCHEDULED),
        ("mint", None, State.SCHEDULED),
        ("trigger", None, State.SCHEDULED),
    ]
    assert {(h["wire_name"], h["queue"]) for h in heard} == {("tests.tick", "default")}
    assert len({h["job_id"] for h in heard}) == 3


def _child_of(store, *parents, run_on="success"):
    from dataclasses import replace

    from backwave_django.core.dependencies import RunOn

    from .support import MAX_PAYLOAD, new_job

    ids = tuple(p.id for p in parents)
    new = replace(new_job(wire_name="tests.child"), parents=ids, run_on=RunOn(run_on))
    return store.enqueue([new], now=T0, max_payload_bytes=MAX_PAYLOAD)[0]


def test_a_child_is_announced_waiting_at_birth_and_released_by_its_last_parent(store, heard):
    parent = enqueue_one(store)
    child = _child_of(store, parent)
    leased = claim_one(store, now=T0)
    report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=LATER)

    assert moves(heard, child.id) == [
        ("enqueue", None, State.AWAITING_PARENT, 0),
        ("resolve", State.AWAITING_PARENT, State.SCHEDULED, 0),
    ]
    assert {h["wire_name"] for h in heard if h["job_id"] == child.id} == {"tests.child"}


def test_a_cascade_announces_every_child_it_cancels_with_its_cause(store, heard):
    parent = enqueue_one(store, max_attempts=1)
    child = _child_of(store, parent)
    grandchild = _child_of(store, child)
    leased = claim_one(store, now=T0)
    report(store, outcome(leased, OutcomeKind.FAILED, message="no"), now=LATER)

    for job_id in (child.id, grandchild.id):
        assert moves(heard, job_id)[-1] == ("resolve", State.AWAITING_PARENT, State.CANCELLED, 0)
        [cause] = [h["cause"] for h in heard if h["job_id"] == job_id and h["operation"] == "resolve"]
        assert cause == store.get_job(job_id).terminal_cause != ""


def test_a_child_born_after_its_parent_failed_is_announced_cancelled(store, heard):
    parent = enqueue_one(store, max_attempts=1)
    report(store, outcome(claim_one(store, now=T0), OutcomeKind.FAILED, message="no"), now=LATER)
    child = _child_of(store, parent)
    assert moves(heard, child.id) == [("enqueue", None, State.CANCELLED, 0)]
