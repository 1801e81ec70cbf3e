"""Enqueue: one or many jobs in one call, in order, bounds checked before any write (``test_bounds.py``
checks each bound), or, for a batch made in parts, any bad part rolling back the parts written before it; the
database stores join the caller's transaction."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction

from backwave_django.core.states import INITIAL_STATES, State
from backwave_django.store.contract import EnqueuedJob, JobView, PayloadTooLarge
from backwave_django.store.memory import MemoryStore

from ..conftest import T0
from .support import MAX_PAYLOAD, claim, enqueue, enqueue_one, job, new_job, snapshot


def test_the_store_declares_whether_enqueue_joins_the_callers_transaction(store):
    """Only a database has a transaction to join; the memory store says it has none."""
    assert store.supports_transactional_enqueue is (not isinstance(store, MemoryStore))


def test_enqueue_creates_a_scheduled_job_at_attempt_zero_visible_to_reads(store):
    new = enqueue_one(
        store,
        wire_name="tests.add",
        queue="emails",
        payload='{"a": 1}',
        max_attempts=5,
        due_at=T0 + timedelta(seconds=3),
        timeout=timedelta(minutes=2),
        now=T0,
    )

    assert type(new) is EnqueuedJob
    assert job(store, new.id) == JobView(
        id=new.id,
        wire_name="tests.add",
        queue="emails",
        payload='{"a": 1}',
        state=State.SCHEDULED,
        attempt=0,
        max_attempts=5,
        due_at=T0 + timedelta(seconds=3),
        created_at=T0,
        terminal_at=None,
        terminal_cause="",
        cancel_requested=False,
        timeout=timedelta(minutes=2),
    )
    assert State.SCHEDULED in INITIAL_STATES
    assert store.get_lease(new.id) is None
    assert store.list_outcomes(new.id) == []


def test_bulk_enqueue_returns_ids_in_input_order(store):
    news = [new_job(wire_name=f"tests.n{i}", due_at=T0 + timedelta(seconds=10 - i)) for i in range(5)]

    enqueued = store.enqueue(news, now=T0, max_payload_bytes=MAX_PAYLOAD)

    assert all(type(e) is EnqueuedJob for e in enqueued)
    ids = [e.id for e in enqueued]
    assert len(set(ids)) == 5
    assert ids == sorted(ids)  # ids are the enqueue order
    assert [job(store, i).wire_name for i in ids] == [f"tests.n{i}" for i in range(5)]
    assert [job(store, i).due_at for i in ids] == [n.due_at for n in news]


def test_bulk_enqueue_is_one_round_trip(db_store, django_assert_max_num_queries):
    news = [new_job() for _ in range(50)]
    # the INSERT, plus the savepoint pair and (on PostgreSQL) the transactional wake-up hint
    with django_assert_max_num_queries(4):
        enqueued = db_store.enqueue(news, now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert len(snapshot(db_store)["jobs"]) == len(enqueued) == 50


def test_enqueue_of_nothing_returns_nothing_and_writes_nothing(store):
    before = snapshot(store)
    assert store.enqueue([], now=T0, max_payload_bytes=MAX_PAYLOAD) == []
    assert snapshot(store) == before


def test_a_multibyte_payload_round_trips_verbatim_through_a_claim(store):
    payload = '{"text": "żółć — 東京 — 🎉"}'
    new = enqueue_one(store, payload=payload)

    [claimed] = claim(store)

    assert (claimed.id, claimed.payload) == (new.id, payload)
    assert job(store, new.id).payload == payload


def test_a_payload_exactly_at_the_limit_is_accepted(store):
    payload = "é" * 50  # 100 bytes
    [new] = store.enqueue([new_job(payload=payload)], now=T0, max_payload_bytes=100)
    assert job(store, new.id).payload == payload


def test_an_oversized_payload_is_rejected_with_its_size_and_the_limit_and_nothing_is_written(store):
    payload = "é" * 60  # 120 bytes in UTF-8, though only 60 characters
    news = [new_job(), new_job(wire_name="tests.big", payload=payload)]
    before = snapshot(store)

    with pytest.raises(PayloadTooLarge) as raised:
        store.enqueue(news, now=T0, max_payload_bytes=100)

    message = str(raised.value)
    assert "120 bytes" in message
    assert "100" in message
    assert "'tests.big' (job 1 of the batch)" in message
    assert snapshot(store) == before  # the valid first job was not written either


def test_a_rejected_enqueue_leaves_existing_jobs_untouched(store):
    enqueue(store, 2)
    before = snapshot(store)

    with pytest.raises(PayloadTooLarge):
        store.enqueue([new_job(payload="x" * 11)], now=T0, max_payload_bytes=10)

    assert snapshot(store) == before


# -- a batch made in parts (a store may write one part while the next is made) ---------------------------

#: More than two of PostgreSQL's parts, the last one short.
MANY = 1234


def made_in_parts(broken_at: int | None = None, oversized_at: int | None = None):
    """A ``make`` for ``enqueue_in_parts``, and the ranges it was asked for. It raises on being asked for
    job ``broken_at``; job ``oversized_at`` has a payload over the limit."""
    asked: list[tuple[int, int]] = []

    def make(start: int, stop: int) -> list:
        asked.append((start, stop))
        if broken_at is not None and start <= broken_at < stop:
            raise RuntimeError(f"cannot make job {broken_at}")
        return [
            new_job(wire_name=f"tests.n{i}", payload="x" * (MAX_PAYLOAD + 1) if i == oversized_at else "{}")
            for i in range(start, stop)
        ]

    return make, asked


def test_a_batch_made_in_parts_is_stored_as_one_enqueue_would_store_it(store):
    make, asked = made_in_parts()

    enqueued = store.enqueue_in_parts(MANY, make, now=T0, max_payload_bytes=MAX_PAYLOAD)

    ids = [e.id for e in enqueued]
    assert len(set(ids)) == MANY and ids == sorted(ids)
    assert [job(store, i).wire_name for i in (ids[0], ids[499], ids[500], ids[-1])] == [
        "tests.n0", "tests.n499", "tests.n500", f"tests.n{MANY - 1}"
    ]  # fmt: skip
    # every job made once, in order
    assert [n for start, stop in asked for n in range(start, stop)] == list(range(MANY))
    assert len(snapshot(store)["jobs"]) == MANY


@pytest.mark.parametrize("count", [0, 1, 7])
def test_a_small_batch_made_in_parts_is_made_at_once(store, count):
    make, asked = made_in_parts()
    enqueued = store.enqueue_in_parts(count, make, now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert asked == [(0, count)]
    assert len(enqueued) == len(snapshot(store)["jobs"]) == count


def test_a_part_that_cannot_be_made_leaves_nothing_of_its_batch(store):
    enqueue(store, 2)
    before = snapshot(store)
    make, _ = made_in_parts(broken_at=MANY - 10)

    with pytest.raises(RuntimeError, match=f"cannot make job {MANY - 10}"):
        store.enqueue_in_parts(MANY, make, now=T0, max_payload_bytes=MAX_PAYLOAD)

    assert snapshot(store) == before
    assert len(enqueue(store, 3)) == 3  # and the store goes on


def test_a_bad_job_in_a_late_part_refuses_the_whole_batch(store):
    before = snapshot(store)
    make, _ = made_in_parts(oversized_at=MANY - 1)

    with pytest.raises(PayloadTooLarge, match=rf"'tests.n{MANY - 1}' \(job {MANY - 1} of the batch\)"):
        store.enqueue_in_parts(MANY, make, now=T0, max_payload_bytes=MAX_PAYLOAD)

    assert snapshot(store) == before


def test_a_future_job_is_not_claimable_until_its_due_time(store):
    new = enqueue_one(store, due_at=T0 + timedelta(minutes=5))

    assert claim(store, now=T0 + timedelta(minutes=5) - timedelta(microseconds=1)) == []
    assert [c.id for c in claim(store, now=T0 + timedelta(minutes=5))] == [new.id]


# -- the caller's transaction (database stores only: the memory store has none to join) ------------------


@pytest.mark.django_db(transaction=True)
def test_a_batch_in_parts_that_fails_inside_the_callers_transaction_takes_only_itself_back(db_store):
    """The caller catches the error and commits: its own jobs stay, nothing of the failed batch does."""
    make, _ = made_in_parts(broken_at=MANY - 1)
    with transaction.atomic(using=db_store.using):
        kept = enqueue_one(db_store, wire_name="tests.before")
        with pytest.raises(RuntimeError):
            db_store.enqueue_in_parts(MANY, make, now=T0, max_payload_bytes=MAX_PAYLOAD)
        also = enqueue_one(db_store, wire_name="tests.after")

    assert [j["id"] for j in snapshot(db_store)["jobs"]] == [kept.id, also.id]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_a_rolled_back_transaction_never_existed(db_store):
    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        ids = [e.id for e in enqueue(db_store, 3)]
        assert [job(db_store, i).state for i in ids] == [State.SCHEDULED] * 3  # visible inside it
        raise Rollback

    assert [db_store.get_job(i) for i in ids] == [None, None, None]
    assert claim(db_store) == []


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_a_committed_transaction_is_claimable(db_store):
    with transaction.atomic():
        new = enqueue_one(db_store)
        db_store.pause_queue("other", actor="caller", now=T0)  # the caller's own write, same transaction

    [claimed] = claim(db_store)
    assert (claimed.id, claimed.attempt) == (new.id, 1)
    assert [q.queue for q in db_store.list_queues()] == ["other"]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_outside_any_transaction_commits_at_once(db_store):
    new = enqueue_one(db_store)

    seen: list[object] = []

    def read_on_another_connection() -> None:
        try:
            seen.append(db_store.get_job(new.id))
        finally:
            connection.close()

    reader = threading.Thread(target=read_on_another_connection)
    reader.start()
    reader.join(timeout=30)

    assert [getattr(v, "state", None) for v in seen] == [State.SCHEDULED]
    assert [c.id for c in claim(db_store)] == [new.id]
