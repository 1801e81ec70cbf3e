"""Bounds: what every store refuses on the way in, before it writes anything, with the same error.

Each bad value is refused by this store with the very exception (type and message) the in-memory store
gives, so users meet one set of rules and one set of messages whatever holds their jobs, and the store is
unchanged afterwards (a bad job in a batch refuses the whole batch). Values at the bounds are accepted.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from backwave_django.store.contract import (
    MAX_ATTEMPTS_LIMIT,
    MAX_CONCURRENCY_LIMIT,
    MAX_QUEUE_NAME_LENGTH,
    MAX_WIRE_NAME_LENGTH,
    JobStore,
    PayloadTooLarge,
    StoreError,
    WireNameTooLong,
)
from backwave_django.store.memory import MemoryStore

from ..conftest import T0
from .support import MAX_PAYLOAD, claim, enqueue, job, new_job, snapshot

BAD_WIRE_NAMES = {
    "empty": "",
    "too-long": "w" * (MAX_WIRE_NAME_LENGTH + 1),
    "leading-space": " tests.noop",
    "trailing-space": "tests.noop ",
    "tab": "tests.\tnoop",
    "newline": "tests.noop\n",
    "nul": "tests.\x00noop",
    "lone-surrogate": "tests.\ud800noop",
    "not-a-str": b"tests.noop",
}
GOOD_WIRE_NAMES = ["w" * MAX_WIRE_NAME_LENGTH, "a", "app.jobs.send_mail", "words with spaces", "東京.仕事"]

BAD_QUEUE_NAMES = {
    "empty": "",
    "too-long": "q" * (MAX_QUEUE_NAME_LENGTH + 1),
    "space": "my queue",
    "slash": "emails/high",
    "leading-dot": ".emails",
    "leading-dash": "-emails",
    "non-ascii": "émails",
    "nul": "emails\x00",
    "newline": "emails\n",
    "not-a-str": 7,
}
GOOD_QUEUE_NAMES = ["q" * MAX_QUEUE_NAME_LENGTH, "a", "0", "emails.high:eu-1_b"]

BAD_MAX_ATTEMPTS = {
    "zero": 0,
    "negative": -1,
    "above-the-limit": MAX_ATTEMPTS_LIMIT + 1,
    "huge": 2**63,
    "bool": True,
    "float": 1.5,
    "str": "3",
}
BAD_LIMITS = {
    "negative": -1,
    "above-the-limit": MAX_CONCURRENCY_LIMIT + 1,
    "bool": True,
    "float": 1.5,
    "str": "2",
}
BAD_PAYLOADS = {"nul": '{"a": "\x00"}', "lone-surrogate": '{"a": "\udcff"}'}


def refusal(action: Callable[[JobStore], object], store: JobStore) -> StoreError:
    """The error ``action`` raises on ``store``, which must have changed nothing; and the same error as the
    in-memory store raises."""
    before = snapshot(store)
    with pytest.raises(StoreError) as raised:
        action(store)
    assert snapshot(store) == before, "a refused request wrote something"
    with pytest.raises(StoreError) as reference:
        action(MemoryStore())
    assert (type(raised.value), str(raised.value)) == (type(reference.value), str(reference.value))
    return raised.value


def enqueue_bad(**fields: object) -> Callable[[JobStore], object]:
    """A batch of a good job and a bad one: nothing of it may be written."""
    return lambda store: store.enqueue(
        [new_job(), new_job(**fields)],  # type: ignore[arg-type]
        now=T0,
        max_payload_bytes=MAX_PAYLOAD,
    )


@pytest.fixture
def store_with_work(store):
    """A store already holding a job, so a refusal is seen to leave existing rows alone too."""
    enqueue(store)
    store.pause_queue("paused", actor="ops", now=T0)
    return store


# -- enqueue -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("wire_name", BAD_WIRE_NAMES.values(), ids=BAD_WIRE_NAMES.keys())
def test_a_bad_wire_name_is_refused_and_nothing_is_written(store_with_work, wire_name):
    error = refusal(enqueue_bad(wire_name=wire_name), store_with_work)
    assert isinstance(error, WireNameTooLong)
    assert "wire name" in str(error)


@pytest.mark.parametrize("wire_name", GOOD_WIRE_NAMES)
def test_a_wire_name_within_the_rules_is_stored_verbatim(store, wire_name):
    [new] = store.enqueue([new_job(wire_name)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert job(store, new.id).wire_name == wire_name


@pytest.mark.parametrize("queue", BAD_QUEUE_NAMES.values(), ids=BAD_QUEUE_NAMES.keys())
def test_a_bad_queue_name_is_refused_on_enqueue_and_nothing_is_written(store_with_work, queue):
    error = refusal(enqueue_bad(queue=queue), store_with_work)
    assert "queue name" in str(error)


@pytest.mark.parametrize("queue", GOOD_QUEUE_NAMES)
def test_a_queue_name_within_the_rules_is_accepted_everywhere(store, queue):
    [new] = store.enqueue([new_job(queue=queue)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    store.set_concurrency_limit(queue, 1, actor="ops", now=T0)
    store.pause_queue(queue, actor="ops", now=T0)
    store.resume_queue(queue, actor="ops", now=T0)
    assert [c.id for c in claim(store, queues=[queue])] == [new.id]


@pytest.mark.parametrize("max_attempts", BAD_MAX_ATTEMPTS.values(), ids=BAD_MAX_ATTEMPTS.keys())
def test_max_attempts_out_of_range_is_refused_and_nothing_is_written(store_with_work, max_attempts):
    error = refusal(enqueue_bad(max_attempts=max_attempts), store_with_work)
    assert f"max_attempts must be an int from 1 to {MAX_ATTEMPTS_LIMIT}" in str(error)


@pytest.mark.parametrize("max_attempts", [1, MAX_ATTEMPTS_LIMIT])
def test_max_attempts_at_its_bounds_is_accepted(store, max_attempts):
    [new] = store.enqueue([new_job(max_attempts=max_attempts)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert job(store, new.id).max_attempts == max_attempts
    assert claim(store)[0].max_attempts == max_attempts


@pytest.mark.parametrize("payload", BAD_PAYLOADS.values(), ids=BAD_PAYLOADS.keys())
def test_a_payload_no_text_column_can_hold_is_refused_and_nothing_is_written(store_with_work, payload):
    error = refusal(enqueue_bad(payload=payload), store_with_work)
    assert "payload of 'tests.noop'" in str(error)


def test_an_oversized_payload_is_refused_identically(store_with_work):
    action = lambda store: store.enqueue([new_job(payload="x" * 11)], now=T0, max_payload_bytes=10)  # noqa: E731
    assert isinstance(refusal(action, store_with_work), PayloadTooLarge)


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BAD_TRACE_CONTEXTS = {
    "too-long": f'{{"traceparent": "{TRACEPARENT}", "tracestate": "k={"v" * 1000}"}}',
    "non-ascii": '{"traceparent": "00-\u00e9"}',
    "control-character": '{"traceparent": "00-\n"}',
    "nul": "\x00",
    "not-a-string": {"traceparent": TRACEPARENT},
}
GOOD_TRACE_CONTEXTS = ["", f'{{"traceparent": "{TRACEPARENT}", "tracestate": "k={"v" * 900}"}}']


@pytest.mark.parametrize("context", BAD_TRACE_CONTEXTS.values(), ids=BAD_TRACE_CONTEXTS.keys())
def test_a_trace_context_no_header_could_carry_is_refused_and_nothing_is_written(store_with_work, context):
    error = refusal(enqueue_bad(trace_context=context), store_with_work)
    assert "trace context of 'tests.noop'" in str(error)


@pytest.mark.parametrize("context", GOOD_TRACE_CONTEXTS, ids=["none", "at-the-bound"])
def test_a_trace_context_within_the_bound_is_stored_and_claimed_verbatim(store, context):
    [new] = store.enqueue([new_job(trace_context=context)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert job(store, new.id).trace_context == context
    assert claim(store)[0].trace_context == context


# -- queue controls ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("queue", BAD_QUEUE_NAMES.values(), ids=BAD_QUEUE_NAMES.keys())
@pytest.mark.parametrize("action", ["pause_queue", "resume_queue", "set_concurrency_limit"])
def test_a_queue_action_on_a_bad_queue_name_is_refused_and_writes_nothing(store_with_work, action, queue):
    def act(store: JobStore) -> object:
        if action == "set_concurrency_limit":
            return store.set_concurrency_limit(queue, 1, actor="ops", now=T0)
        return getattr(store, action)(queue, actor="ops", now=T0)

    assert "queue name" in str(refusal(act, store_with_work))


@pytest.mark.parametrize("limit", BAD_LIMITS.values(), ids=BAD_LIMITS.keys())
def test_a_concurrency_limit_out_of_range_is_refused_and_writes_nothing(store_with_work, limit):
    error = refusal(
        lambda store: store.set_concurrency_limit("default", limit, actor="ops", now=T0), store_with_work
    )
    assert f"a concurrency limit is an int from 0 to {MAX_CONCURRENCY_LIMIT}, or None" in str(error)


@pytest.mark.parametrize("limit", [0, 1, MAX_CONCURRENCY_LIMIT, None])
def test_a_concurrency_limit_within_its_range_is_accepted(store, limit):
    store.set_concurrency_limit("default", limit, actor="ops", now=T0)
    assert [(q.queue, q.concurrency_limit) for q in store.list_queues()] == [("default", limit)]
