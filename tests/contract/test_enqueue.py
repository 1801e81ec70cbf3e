"""Enqueue: one or many jobs in one call, bounds checked before any write, joins the caller's transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction

from backwave_django.core.states import INITIAL_STATES, State
from backwave_django.models import Job, Lease
from backwave_django.store.contract import (
    MAX_QUEUE_NAME_LENGTH,
    MAX_WIRE_NAME_LENGTH,
    PayloadTooLarge,
    StoreError,
    WireNameTooLong,
)

from ..conftest import T0
from .support import MAX_PAYLOAD, claim, enqueue, enqueue_one, new_job, snapshot

pytestmark = pytest.mark.django_db


def test_the_store_declares_transactional_enqueue(store):
    assert store.supports_transactional_enqueue is True


def test_enqueue_creates_a_scheduled_job_at_attempt_zero_visible_to_reads(store):
    job = enqueue_one(store, wire_name="tests.add", queue="emails", payload='{"a": 1}', max_attempts=5)

    stored = Job.objects.get(id=job.id)
    assert State(stored.state) is State.SCHEDULED
    assert State(stored.state) in INITIAL_STATES
    assert (stored.wire_name, stored.queue, stored.payload) == ("tests.add", "emails", '{"a": 1}')
    assert (stored.attempt, stored.max_attempts) == (0, 5)
    assert (stored.due_at, stored.created_at) == (T0, T0)
    assert stored.terminal_at is None
    assert stored.terminal_cause == ""
    assert stored.cancel_requested is False
    assert not Lease.objects.filter(job_id=job.id).exists()


def test_bulk_enqueue_returns_saved_rows_with_ids_in_input_order(store):
    news = [new_job(wire_name=f"tests.n{i}", due_at=T0 + timedelta(seconds=10 - i)) for i in range(5)]

    jobs = store.enqueue(news, now=T0, max_payload_bytes=MAX_PAYLOAD)

    assert [j.wire_name for j in jobs] == [f"tests.n{i}" for i in range(5)]
    assert all(j.id is not None for j in jobs)
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)  # ids are the enqueue order
    stored = dict(Job.objects.values_list("id", "wire_name"))
    assert stored == {j.id: j.wire_name for j in jobs}


def test_bulk_enqueue_is_one_round_trip(store, django_assert_max_num_queries):
    news = [new_job() for _ in range(50)]
    # the INSERT, plus the savepoint pair and (on PostgreSQL) the transactional wake-up hint
    with django_assert_max_num_queries(4):
        store.enqueue(news, now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert Job.objects.count() == 50


def test_enqueue_of_nothing_returns_nothing_and_writes_nothing(store):
    assert store.enqueue([], now=T0, max_payload_bytes=MAX_PAYLOAD) == []
    assert Job.objects.count() == 0


def test_a_multibyte_payload_round_trips_verbatim_through_a_claim(store):
    payload = '{"text": "żółć — 東京 — 🎉"}'
    job = enqueue_one(store, payload=payload)

    [claimed] = claim(store)

    assert (claimed.id, claimed.payload) == (job.id, payload)


def test_a_payload_exactly_at_the_limit_is_accepted(store):
    payload = "x" * 100
    [job] = store.enqueue([new_job(payload=payload)], now=T0, max_payload_bytes=100)
    assert Job.objects.get(id=job.id).payload == payload


def test_an_oversized_payload_is_rejected_with_its_size_and_the_limit_and_nothing_is_written(store):
    payload = "é" * 60  # 120 bytes in UTF-8, though only 60 characters
    news = [new_job(), new_job(wire_name="tests.big", payload=payload)]

    with pytest.raises(PayloadTooLarge) as raised:
        store.enqueue(news, now=T0, max_payload_bytes=100)

    message = str(raised.value)
    assert "120 bytes" in message
    assert "100" in message
    assert "tests.big" in message
    assert Job.objects.count() == 0  # the valid first job was not written either


@pytest.mark.parametrize("wire_name", ["", "w" * (MAX_WIRE_NAME_LENGTH + 1)], ids=["empty", "too-long"])
def test_a_bad_wire_name_is_rejected_and_nothing_is_written(store, wire_name):
    with pytest.raises(WireNameTooLong, match=str(MAX_WIRE_NAME_LENGTH)):
        store.enqueue([new_job(), new_job(wire_name=wire_name)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert Job.objects.count() == 0


def test_a_wire_name_at_the_length_limit_is_accepted(store):
    job = enqueue_one(store, wire_name="w" * MAX_WIRE_NAME_LENGTH)
    assert len(Job.objects.get(id=job.id).wire_name) == MAX_WIRE_NAME_LENGTH


@pytest.mark.parametrize("queue", ["", "q" * (MAX_QUEUE_NAME_LENGTH + 1)], ids=["empty", "too-long"])
def test_a_bad_queue_name_is_rejected_and_nothing_is_written(store, queue):
    with pytest.raises(StoreError, match="queue name"):
        store.enqueue([new_job(), new_job(queue=queue)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert Job.objects.count() == 0


@pytest.mark.parametrize("max_attempts", [0, -1])
def test_max_attempts_below_one_is_rejected_and_nothing_is_written(store, max_attempts):
    with pytest.raises(StoreError, match="max_attempts"):
        store.enqueue([new_job(), new_job(max_attempts=max_attempts)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert Job.objects.count() == 0


def test_a_rejected_enqueue_leaves_existing_jobs_untouched(store):
    enqueue(store, 2)
    before = snapshot()

    with pytest.raises(PayloadTooLarge):
        store.enqueue([new_job(payload="x" * 11)], now=T0, max_payload_bytes=10)

    assert snapshot() == before


def test_a_future_job_is_not_claimable_until_its_due_time(store):
    job = enqueue_one(store, due_at=T0 + timedelta(minutes=5))

    assert claim(store, now=T0 + timedelta(minutes=5) - timedelta(microseconds=1)) == []
    assert [c.id for c in claim(store, now=T0 + timedelta(minutes=5))] == [job.id]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_a_rolled_back_transaction_never_existed(store):
    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        enqueue(store, 3)
        assert Job.objects.count() == 3  # visible inside the caller's transaction
        raise Rollback

    assert Job.objects.count() == 0
    assert claim(store) == []


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_a_committed_transaction_is_claimable(store):
    with transaction.atomic():
        job = enqueue_one(store)
        Job.objects.filter(id=job.id).update(payload='{"touched": true}')  # the caller's own write

    [claimed] = claim(store)
    assert (claimed.id, claimed.payload, claimed.attempt) == (job.id, '{"touched": true}', 1)


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_outside_any_transaction_commits_at_once(store):
    job = enqueue_one(store)
    assert Job.objects.filter(id=job.id).exists()
    assert [c.id for c in claim(store)] == [job.id]
