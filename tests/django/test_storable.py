"""What encode and clean return is written and read back unchanged, on SQLite and PostgreSQL alike; a stored
payload that no longer decodes quarantines its job with a storable cause that never quotes the value.

Run once per database like the rest of the suite (PostgreSQL with DATABASE_URL=postgres://...). The values
come from the codec's property tests, lone surrogates and NUL characters included.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import DataError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backwave_django.codec import MAX_DEPTH, MAX_INT_DIGITS, PayloadError, decode, encode
from backwave_django.core.text import MAX_DETAIL_BYTES, clean
from backwave_django.models import Job
from backwave_django.store.contract import PayloadTooLarge

from .. import jobs
from .test_codec import any_text, canonical, should_be_refused, values

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
# Every example writes a row inside the test's one transaction, which the db fixture rolls back at the end.
STORED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def stored(**fields: str) -> Job:
    """A job written with ``fields`` and read back from the database."""
    job = Job.objects.create(wire_name="tests.storable", due_at=T0, created_at=T0, **fields)
    return Job.objects.get(id=job.id)


@STORED
@given(value=values)
def test_any_payload_encode_returns_is_stored_and_read_back_identically(db, value):
    try:
        text = encode({"value": value})
    except PayloadError:
        return
    payload = stored(payload=text).payload
    assert payload == text
    assert canonical(decode(payload)["value"]) == canonical(value)


@STORED
@given(value=values)
def test_any_value_given_to_enqueue_is_stored_and_read_back_equal_or_refused_naming_it_and_nothing_written(
    db, value
):
    """Through ``JobFunction.enqueue`` itself, on the real database: a value the codec refuses raises
    PayloadError naming the argument and the job, and writes nothing; any other value is stored and read
    back equal (and of the same types, all the way down)."""
    before = Job.objects.count()
    try:
        job = jobs.add.enqueue(a=value, b=1)
    except PayloadError as error:
        assert should_be_refused(value)
        assert str(error).startswith("cannot enqueue 'tests.add': argument 'a'")
        assert Job.objects.count() == before
        return
    except PayloadTooLarge:  # the whole payload past MAX_PAYLOAD_BYTES: refused before it is written too
        assert Job.objects.count() == before
        return
    assert not should_be_refused(value)
    assert Job.objects.count() == before + 1
    back = decode(Job.objects.get(id=job.id).payload)
    assert canonical(back) == canonical({"a": value, "b": 1})


EDGES = [
    pytest.param("\x00", id="NUL"),
    pytest.param("before\x00after\x00", id="NUL inside text"),
    pytest.param("\\u0000", id="an escaped NUL as text"),
    pytest.param(
        "😀 \U0010ffff \uffff \ufeff \u2028", id="four-byte, last, non-character, BOM, line separator"
    ),
    pytest.param('"quotes" \\ \n\t\r\x1f\x7f', id="quotes, backslash and control characters"),
    pytest.param({"key\x00": ["\x00"]}, id="NUL in a key"),
    pytest.param(10**MAX_INT_DIGITS - 1, id="the largest integer"),
    pytest.param([[[[[[[[[[[[]]]]]]]]]]]] * 3, id="nesting"),
]


@pytest.mark.parametrize("value", EDGES)
def test_an_edge_case_payload_is_stored_and_read_back_identically(db, value):
    text = encode({"value": value})
    assert stored(payload=text).payload == text
    assert decode(text) == {"value": value}


def test_the_deepest_payload_is_stored_and_decoded(db):
    value: object = dt.date(2026, 1, 1)
    for _ in range(MAX_DEPTH):
        value = (value,)
    assert decode(stored(payload=encode({"value": value})).payload) == {"value": value}


@STORED
@given(
    text=any_text,
    max_bytes=st.integers(0, 300) | st.just(MAX_DETAIL_BYTES),
    keep=st.sampled_from(["start", "end"]),
)
def test_any_text_clean_returns_is_stored_and_read_back_identically(db, text, max_bytes, keep):
    cleaned = clean(text, max_bytes, keep=keep)
    assert stored(terminal_cause=cleaned).terminal_cause == cleaned


# Why encode and clean keep these out: the database cannot take them.


def test_a_lone_surrogate_cannot_be_written_to_either_database(db):
    with pytest.raises(UnicodeEncodeError), transaction.atomic():
        stored(payload='{"name":"\ud800"}')


def test_a_raw_nul_cannot_be_written_to_postgresql(db):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite stores a raw NUL; PostgreSQL text cannot")
    with pytest.raises(DataError, match="cannot contain NUL"), transaction.atomic():
        stored(terminal_cause="a\x00b")


# What used to halt a worker: each of these payloads made decoding raise something other than
# PayloadDecodeError. Now the job is quarantined, the pump goes on, and the cause names the problem.
UNREADABLE = [
    pytest.param("[" * 100_000 + "]" * 100_000, "payload nests too deeply to read", id="nested 100,000 deep"),
    pytest.param("7" * 5000, "argument 'a' is an integer of 5000 digits", id="5,000 digits"),
    pytest.param(
        '{"$bw": "timedelta", "v": [1000000000, 0, 0]}',
        "argument 'a' is a tagged timedelta out of range",
        id="a timedelta that overflows",
    ),
    pytest.param(
        '{"$bw": "timedelta", "v": {"0": 1}}',
        "argument 'a' is a tagged timedelta whose 'v' is an object",
        id="a dict",
    ),
    pytest.param(
        '[0, {"$bw": "date", "v": "SECRET"}]',
        "argument 'a'[1] is a tagged date whose text is not an ISO 8601 date",
        id="a date that is not one",
    ),
]


@pytest.mark.parametrize(("value", "cause"), UNREADABLE)
def test_a_payload_that_no_longer_decodes_quarantines_its_job_with_a_cause_that_never_quotes_it(
    backwave_pump, value, cause
):
    now = backwave_pump.now
    text = '{"a": ' + value + ', "b": "SECRET"}'
    unreadable = Job.objects.create(wire_name="tests.add", payload=text, due_at=now, created_at=now)
    readable = jobs.add.enqueue(a=1, b=2)
    outcomes = {execution.job_id: execution.outcome for execution in backwave_pump.run_due()}
    assert outcomes == {unreadable.id: "unroutable", readable.id: "succeeded"}
    unreadable.refresh_from_db()
    assert unreadable.state == "quarantined"
    assert cause in unreadable.terminal_cause
    assert "SECRET" not in unreadable.terminal_cause
