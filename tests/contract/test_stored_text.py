"""Text a worker or an operator writes on the way out is always stored: cleaned and bounded, never refused.

Messages, terminal causes, tracebacks, actors and health details may hold NUL characters (which no
PostgreSQL text column holds), lone surrogates (which no database encodes) and any length. Every store
writes them through ``core.text.clean``: NULs dropped, surrogates replaced by U+FFFD, cut to their bound in
UTF-8 bytes without splitting a character; a traceback keeps its end, where the exception finally raised is.

A row the database refuses anyway must not cost the other rows of its batch their outcome: the portable and
PostgreSQL stores retry a refused batch row by row and write a row still refused with a generic message.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, OperationalError, transaction

from backwave_django.core.health import Health
from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import State
from backwave_django.store.contract import (
    MAX_DETAIL_BYTES,
    MAX_HEALTH_DETAIL_BYTES,
    MAX_MESSAGE_BYTES,
    OutcomeDetail,
)

from ..conftest import T0
from .support import OTHER_WORKER, claim, claim_one, enqueue, enqueue_one, job, outcome, report, snapshot

SOON = T0 + timedelta(seconds=5)
CUT = "[...]"
FRAME = '  File "/srv/app/jobs.py", line 12, in handle\n    return step(payload)\n'
#: A traceback of 100,000 characters whose last line (the exception raised) is hostile too.
LONG_TRACEBACK = (
    "Traceback (most recent call last):\n" + FRAME * 1400 + "ValueError: bad \x00input \ud800 here"
)
LONG_TRACEBACK = LONG_TRACEBACK.rjust(100_000, "#")

#: (what the handler said, what every store stores)
HOSTILE_MESSAGES = {
    "nul": ("ValueError: bad\x00 input\x00", "ValueError: bad input"),
    "lone-surrogates": ("KeyError: \ud800 and \udfff", "KeyError: \ufffd and \ufffd"),
    "100k-ascii": ("x" * 100_000, "x" * (MAX_MESSAGE_BYTES - len(CUT)) + CUT),
    "100k-multibyte": ("€" * 100_000, "€" * ((MAX_MESSAGE_BYTES - len(CUT)) // 3) + CUT),
    "everything": (
        "\x00\ud83d" + "ж" * 100_000,
        "\ufffd" + "ж" * ((MAX_MESSAGE_BYTES - len(CUT) - 3) // 2) + CUT,
    ),
}


def storable(text: str, max_bytes: int) -> bool:
    return "\x00" not in text and len(text.encode("utf-8")) <= max_bytes


@pytest.mark.parametrize("said, stored", HOSTILE_MESSAGES.values(), ids=HOSTILE_MESSAGES.keys())
def test_a_hostile_failure_message_is_stored_cleaned_and_bounded_as_outcome_and_cause(store, said, stored):
    enqueue_one(store, max_attempts=1)
    claimed = claim_one(store)

    result = report(store, outcome(claimed, OutcomeKind.FAILED, message=said), now=SOON)

    assert result.applied == {claimed.id}
    [row] = store.list_outcomes(claimed.id)
    view = job(store, claimed.id)
    assert (view.state, row.message, view.terminal_cause) == (State.DEAD_LETTERED, stored, stored)
    assert storable(row.message, MAX_MESSAGE_BYTES)


@pytest.mark.parametrize("kind", [OutcomeKind.UNROUTABLE, OutcomeKind.FAILED])
def test_a_hostile_message_that_does_not_end_the_job_is_cleaned_too(store, kind):
    enqueue_one(store, max_attempts=3)
    claimed = claim_one(store)

    report(store, outcome(claimed, kind, message="no \x00handler\ud800"), now=SOON)

    [row] = store.list_outcomes(claimed.id)
    assert row.message == "no handler\ufffd"


def test_a_hostile_100k_traceback_is_stored_cleaned_keeping_its_end(store):
    enqueue_one(store, max_attempts=3)
    claimed = claim_one(store)

    report(
        store,
        outcome(claimed, OutcomeKind.FAILED, message="ValueError: bad input"),
        now=SOON,
        details={claimed.id: OutcomeDetail(traceback=LONG_TRACEBACK)},
    )

    [row] = store.list_outcomes(claimed.id)
    assert len(LONG_TRACEBACK) == 100_000
    assert storable(row.detail, MAX_DETAIL_BYTES)
    assert row.detail.startswith(CUT)
    assert row.detail.endswith(FRAME + "ValueError: bad input \ufffd here")
    assert len(row.detail.encode("utf-8")) == MAX_DETAIL_BYTES  # ASCII but for one U+FFFD: cut exactly


def test_a_batch_of_hostile_rows_is_written_whole(store):
    """One batch holding every hostile message: nothing in it may make the database refuse the batch."""
    enqueue(store, len(HOSTILE_MESSAGES), max_attempts=1)
    claimed = claim(store)
    said = [s for s, _ in HOSTILE_MESSAGES.values()]

    result = report(
        store,
        *(outcome(c, OutcomeKind.FAILED, message=m) for c, m in zip(claimed, said, strict=True)),
        now=SOON,
        details={c.id: OutcomeDetail(traceback=LONG_TRACEBACK) for c in claimed},
    )

    assert result.applied == {c.id for c in claimed}
    assert [store.list_outcomes(c.id)[0].message for c in claimed] == [
        s for _, s in HOSTILE_MESSAGES.values()
    ]
    assert all(storable(store.list_outcomes(c.id)[0].detail, MAX_DETAIL_BYTES) for c in claimed)


def test_a_hostile_actor_is_stored_cleaned_and_bounded(store):
    actor = "ops\x00 \udc80" + "é" * 1000
    new = enqueue_one(store, due_at=T0 + timedelta(hours=1))

    store.cancel(new.id, actor=actor, now=T0)
    store.pause_queue("emails", actor=actor, now=T0)

    cancel, pause = store.list_audit()
    assert cancel.actor == pause.actor
    assert cancel.actor.startswith("ops \ufffdéé") and cancel.actor.endswith(CUT)
    assert storable(cancel.actor, 255)
    cause = job(store, new.id).terminal_cause
    assert cause.startswith("cancelled by ops \ufffdéé") and storable(cause, MAX_MESSAGE_BYTES)


def test_a_hostile_health_detail_is_stored_cleaned_and_bounded(store):
    store.record_pump(
        worker_id="host:9:default:z",
        group="default",
        queues=["default"],
        health=Health.DEGRADED,
        detail="OperationalError: \x00server closed \ud800" + "!" * 100_000,
        started_at=T0,
        now=T0,
    )

    [pump] = store.list_pumps()
    assert pump.detail.startswith("OperationalError: server closed \ufffd!!!")
    assert storable(pump.detail, MAX_HEALTH_DETAIL_BYTES)


# -- a row the database refuses (database stores: only a database refuses a row) ---------------------------

GENERIC = "the outcome's text could not be stored (DatabaseError)"
POISON = "this message is refused by the database"


def refuse(store, monkeypatch, error: DatabaseError, *, saying: str | None = None) -> None:
    """Make the database refuse any report batch holding a row whose message is ``saying`` (None: every
    batch), as it would a value it cannot store, after the batch's statements ran (they are rolled back with
    it). Cleaning makes such text impossible to send through the contract, so the refusal is injected into
    the store's batch write, ``_report``."""
    real = store._report

    def refusing(worker_id, reports, retry, now, details):
        if saying is not None and all(r.message != saying for r in reports):
            return real(worker_id, reports, retry, now, details)
        with transaction.atomic(using=store.using):
            real(worker_id, reports, retry, now, details)
            raise error

    monkeypatch.setattr(store, "_report", refusing)


def test_a_row_the_database_refuses_is_written_with_a_generic_message_and_the_others_keep_theirs(
    db_store, monkeypatch
):
    enqueue(db_store, 4, max_attempts=1)
    ok, refused, failed = claim(db_store, max_jobs=3)
    [foreign] = claim(db_store, worker=OTHER_WORKER)
    refuse(db_store, monkeypatch, DatabaseError("value refused"), saying=POISON)

    result = report(
        db_store,
        outcome(ok, OutcomeKind.SUCCEEDED),
        outcome(refused, OutcomeKind.FAILED, message=POISON),
        outcome(failed, OutcomeKind.FAILED, message="ValueError: its own"),
        outcome(foreign, OutcomeKind.SUCCEEDED),
        now=SOON,
        details={
            refused.id: OutcomeDetail(traceback="Traceback: refused too"),
            failed.id: OutcomeDetail(traceback="Traceback: its own"),
        },
    )

    assert (result.applied, result.stale) == ({ok.id, refused.id, failed.id}, {foreign.id})
    assert [(o.kind, o.message, o.detail) for o in db_store.list_outcomes(refused.id)] == [
        (OutcomeKind.FAILED, GENERIC, "")
    ]
    assert (job(db_store, refused.id).state, job(db_store, refused.id).terminal_cause) == (
        State.DEAD_LETTERED,
        GENERIC,
    )
    assert [(o.message, o.detail) for o in db_store.list_outcomes(failed.id)] == [
        ("ValueError: its own", "Traceback: its own")
    ]
    assert job(db_store, failed.id).terminal_cause == "ValueError: its own"
    assert job(db_store, ok.id).state is State.SUCCEEDED
    assert (job(db_store, foreign.id).state, db_store.list_outcomes(foreign.id)) == (State.LEASED, [])
    assert db_store.get_lease(foreign.id).owner == OTHER_WORKER


def test_a_transient_refusal_of_a_batch_is_raised_for_a_later_retry_and_writes_nothing(db_store, monkeypatch):
    enqueue(db_store, 2)
    first, second = claim(db_store)
    refuse(db_store, monkeypatch, OperationalError("database is locked"), saying=POISON)
    before = snapshot(db_store)

    with pytest.raises(OperationalError):
        report(
            db_store,
            outcome(first, OutcomeKind.SUCCEEDED),
            outcome(second, OutcomeKind.FAILED, message=POISON),
        )

    assert snapshot(db_store) == before


def test_a_store_that_refuses_even_the_generic_row_raises_and_writes_nothing(db_store, monkeypatch):
    enqueue(db_store, 2)
    first, second = claim(db_store)
    refuse(db_store, monkeypatch, DatabaseError("the outcome table is gone"))
    before = snapshot(db_store)

    with pytest.raises(DatabaseError, match="the outcome table is gone"):
        report(db_store, outcome(first, OutcomeKind.SUCCEEDED), outcome(second, OutcomeKind.SUCCEEDED))

    assert snapshot(db_store) == before
