"""The enqueue API: validation against the signature, JSON encoding, overrides, bulk, transactions."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.utils import timezone

from backwave_django import codec
from backwave_django.models import Job
from backwave_django.registry import registry

from .. import jobs


def test_enqueue_stores_a_scheduled_job_due_now_and_returns_it(db):
    before = timezone.now()
    job = jobs.add.enqueue(a=1, b=2)
    assert isinstance(job, Job)
    stored = Job.objects.get(id=job.id)
    assert (stored.wire_name, stored.queue, stored.state, stored.attempt) == (
        "tests.add",
        "default",
        "scheduled",
        0,
    )
    assert stored.max_attempts == 3
    assert before <= stored.due_at <= timezone.now()
    assert codec.decode(stored.payload) == {"a": 1, "b": 2}


def test_positional_arguments_are_stored_by_name(db):
    job = jobs.add.enqueue(4, b=5)
    assert codec.decode(job.payload) == {"a": 4, "b": 5}


def test_rich_types_round_trip_through_the_payload(db):
    values = {
        "a": [dt.date(2026, 1, 2), dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC), uuid.UUID(int=7)],
        "b": {"price": Decimal("1.10"), "pair": (1, 2)},
    }
    job = jobs.add.enqueue(**values)
    assert registry.get("tests.add").decode(Job.objects.get(id=job.id).payload) == values


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"a": 1, "c": 2}, "unexpected argument.*'c'"),
        ({"a": 1}, "missing a required argument: 'b'"),
    ],
)
def test_arguments_that_do_not_fit_the_signature_are_refused_and_nothing_is_written(db, kwargs, match):
    with pytest.raises(TypeError, match=match):
        jobs.add.enqueue(**kwargs)
    assert not Job.objects.exists()


def test_an_argument_that_cannot_be_encoded_is_refused_naming_it(db):
    with pytest.raises(codec.PayloadError, match=r"argument 'b' is a django.contrib.auth.models.User"):
        from django.contrib.auth.models import User

        jobs.add.enqueue(a=1, b=User(username="x"))
    with open(__file__) as handle, pytest.raises(codec.PayloadError, match="argument 'a'"):
        jobs.add.enqueue(a=handle, b=1)
    assert not Job.objects.exists()


def test_using_overrides_queue_start_time_and_ceiling_for_one_call(db):
    later = timezone.now() + dt.timedelta(hours=1)
    job = jobs.add.using(queue="critical", run_after=later, max_attempts=9).enqueue(a=1, b=1)
    assert (job.queue, job.due_at, job.max_attempts) == ("critical", later, 9)
    delayed = jobs.add.using(run_after=dt.timedelta(minutes=5)).enqueue(a=1, b=1)
    assert delayed.due_at > timezone.now() + dt.timedelta(minutes=4)
    assert jobs.add.enqueue(a=1, b=1).queue == "default"  # the original is untouched


def test_a_naive_run_after_is_refused(db):
    with pytest.raises(ValueError, match="naive"):
        jobs.add.using(run_after=dt.datetime(2030, 1, 1)).enqueue(a=1, b=1)
    assert not Job.objects.exists()


def test_a_payload_over_the_size_limit_is_refused(db, settings):
    settings.BACKWAVE = {"MAX_PAYLOAD_BYTES": 64}
    from backwave_django.store import PayloadTooLarge

    with pytest.raises(PayloadTooLarge, match="limit is 64"):
        jobs.add.enqueue(a="x" * 100, b=1)
    assert not Job.objects.exists()


def test_a_payload_over_the_size_limit_in_a_large_batch_is_named_by_its_call(db, settings):
    settings.BACKWAVE = {"MAX_PAYLOAD_BYTES": 64}
    from backwave_django.store import PayloadTooLarge

    calls = [{"a": "x" * 100 if n == 1150 else n, "b": n} for n in range(1200)]  # beyond a part on PostgreSQL
    with pytest.raises(PayloadTooLarge, match=r"'tests.add' \(job 1150 of the batch\) is \d+ bytes"):
        jobs.add.enqueue_many(calls)
    assert not Job.objects.exists()


def test_enqueue_many_writes_every_job_in_one_round_trip(db, django_assert_max_num_queries):
    from django.db import connection

    # PostgreSQL: one statement (insert and hint). SQLite: one insert in a savepoint; Django 5.2
    # splits inserts at 999 parameters (90 rows), so the batch is kept under that here.
    with django_assert_max_num_queries(1 if connection.vendor == "postgresql" else 4):
        created = jobs.add.enqueue_many([{"a": n, "b": n} for n in range(80)])
    assert len(created) == 80
    assert [codec.decode(j.payload)["a"] for j in created] == list(range(80))
    assert Job.objects.count() == 80


def test_enqueue_many_refuses_the_whole_batch_when_one_call_is_bad(db):
    with pytest.raises(TypeError, match="call 1 of enqueue_many"):
        jobs.add.enqueue_many([{"a": 1, "b": 1}, {"a": 1}])
    with pytest.raises(codec.PayloadError, match="call 1"):
        jobs.add.enqueue_many([(1, 1), (1, object())])
    assert not Job.objects.exists()


def test_a_bad_call_late_in_a_large_batch_is_named_and_refuses_the_batch(db):
    calls: list[tuple[object, ...]] = [(n, n) for n in range(1200)]
    calls[1100] = (1, object())
    with pytest.raises(codec.PayloadError, match=r"call 1100 of 'tests\.add'"):
        jobs.add.enqueue_many(calls)
    assert not Job.objects.exists()


def test_a_large_enqueue_many_goes_to_postgresql_in_parts_of_one_transaction(db):
    """The server inserts one part while this process encodes the next; the ids still come in call order."""
    if connection.vendor != "postgresql":
        pytest.skip("parts are PostgreSQL's")
    from backwave_django.store.postgres import PART

    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        created = jobs.add.enqueue_many([(n, n) for n in range(2 * PART + 1)])

    assert sum("INSERT INTO backwave_django_job" in sql for sql in sent) == 3
    assert [codec.decode(j.payload)["a"] for j in created] == list(range(2 * PART + 1))
    stored = Job.objects.order_by("id")
    assert [j.id for j in created] == [j.id for j in stored]
    assert [codec.decode(j.payload)["a"] for j in stored] == list(range(2 * PART + 1))


def test_a_large_batch_with_a_key_or_tags_keeps_their_rules(db):
    """Keys and tags take the portable path whatever the batch size: the first call holds the key, every
    call gets the tags."""
    from backwave_django.models import JobTag

    held = jobs.add.using(unique_key="nightly").enqueue_many([(n, n) for n in range(1200)])
    assert [j.duplicate for j in held] == [False] + [True] * 1199
    assert {j.id for j in held} == {held[0].id} and Job.objects.count() == 1

    tagged = jobs.add.using(tags=["bulk"]).enqueue_many([(n, n) for n in range(1200)])
    assert len({j.id for j in tagged}) == 1200
    assert JobTag.objects.filter(job__in=[j.id for j in tagged], tag="bulk").count() == 1200


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_rolled_back_transaction_leaves_no_job():
    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        jobs.add.enqueue(a=1, b=2)
        raise Abort
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_committed_transaction_commits_with_the_callers_writes():
    from django.contrib.auth.models import User

    with transaction.atomic():
        user = User.objects.create(username="ada")
        job = jobs.add.enqueue(a=user.id, b=0)
    assert Job.objects.filter(id=job.id).exists()
    assert User.objects.filter(id=user.id).exists()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"queue": ""}, "queue"),
        ({"queue": "a\x00b"}, "queue name"),
        ({"queue": "with space"}, "queue name"),
        ({"queue": 10**5000}, "queue name must be a str"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 2**40}, "max_attempts must be an int from 1 to 100000"),
        ({"max_attempts": True}, "max_attempts"),
        ({"timeout": 0}, "timeout must be more than 0"),
        ({"timeout": float("inf")}, "timeout must be a number of seconds"),
        ({"timeout": float("nan")}, "timeout must be a number of seconds"),
        ({"timeout": 1e300}, "at most 7 days"),
        ({"timeout": dt.timedelta(days=8)}, "at most 7 days"),
        ({"timeout": "60"}, "timeout must be a number of seconds"),
    ],
)
def test_bad_per_call_overrides_are_refused(db, options, match):
    from backwave_django import JobDefinitionError

    with pytest.raises(JobDefinitionError, match=match):
        jobs.add.using(**options)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"a": 10**5000, "b": 1}, "argument 'a'"),
        ({"a": 1, "b": "file \udcff"}, "argument 'b'"),
    ],
    ids=["a 5,000-digit int", "a lone surrogate"],
)
def test_unstorable_arguments_are_refused_naming_them_and_nothing_is_written(db, kwargs, argument):
    with pytest.raises(codec.PayloadError, match=argument):
        jobs.add.enqueue(**kwargs)
    assert not Job.objects.exists()


def test_deep_nesting_is_refused_at_enqueue_naming_the_argument(db):
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(codec.PayloadError, match="argument 'a'"):
        jobs.add.enqueue(a=deep, b=1)
    assert not Job.objects.exists()


def test_a_job_timeout_is_stored_with_it_and_given_to_the_worker(db):
    from backwave_django.testing import TestPump

    job = jobs.add.using(timeout=90).enqueue(a=1, b=2)
    assert Job.objects.get(id=job.id).timeout == dt.timedelta(seconds=90)
    with TestPump() as pump:
        assert [e.outcome for e in pump.run_due()] == ["succeeded"]


# Prepared statements (PostgreSQL): the enqueue statements stay prepared on the connection, and nothing else
# about the project's connection changes.

PREPARED_ENQUEUES = (
    "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO backwave_django_job%'"
)


def prepared_enqueues() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(PREPARED_ENQUEUES)
        return cursor.fetchone()[0]


def test_the_enqueue_statements_are_prepared_and_the_projects_queries_are_not(postgres):
    from django.db import connection

    for _ in range(3):
        jobs.add.enqueue(a=1, b=2)
    jobs.add.enqueue_many([(1, 2), (3, 4)])
    assert prepared_enqueues() == 2  # one for a single job, one for a batch
    assert connection.connection.prepare_threshold is None  # Django's setting, as it was
    Job.objects.filter(queue="default").count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement NOT LIKE '%backwave%'")
        assert cursor.fetchone()[0] == 0
    assert Job.objects.count() == 5


def test_prepared_statements_can_be_turned_off_for_poolers_that_cannot_keep_them(postgres, settings):
    settings.BACKWAVE = {**settings.BACKWAVE, "PREPARED_STATEMENTS": False}
    for _ in range(3):
        jobs.add.enqueue(a=1, b=2)
    jobs.add.enqueue_many([(1, 2), (3, 4)])
    assert prepared_enqueues() == 0
    assert Job.objects.count() == 5


def forget_prepared_statements() -> None:
    """What a pooler handing the next statement another server connection looks like: the server forgets
    the statements psycopg believes prepared (run by a client-side cursor, behind psycopg's back)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("in_transaction", [False, True])
def test_a_lost_prepared_statement_fails_with_a_hint_and_is_prepared_again(postgres, in_transaction):
    """The error names the setting and writes nothing; the next enqueue (after the caller's transaction has
    rolled back, or at once in autocommit) prepares it again."""
    from django.db import DatabaseError

    jobs.add.enqueue(a=1, b=2)
    forget_prepared_statements()
    with pytest.raises(DatabaseError) as failure:
        if in_transaction:
            with transaction.atomic():
                jobs.add.enqueue(a=3, b=4)
        else:
            jobs.add.enqueue(a=3, b=4)
    assert "BACKWAVE['PREPARED_STATEMENTS'] = False" in "\n".join(failure.value.__notes__)
    jobs.add.enqueue(a=5, b=6)
    jobs.add.enqueue(a=7, b=8)
    assert sorted(Job.objects.values_list("payload", flat=True)) == [
        '{"a":1,"b":2}', '{"a":5,"b":6}', '{"a":7,"b":8}'
    ]  # fmt: skip


def test_a_rolled_back_transaction_does_not_break_the_next_enqueue(postgres):
    jobs.add.enqueue(a=1, b=2)
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.add.enqueue(a=3, b=4)
        raise RuntimeError("roll back")
    jobs.add.enqueue(a=5, b=6)
    assert Job.objects.count() == 2


def test_reports_of_every_size_are_prepared_but_claims_never_even_where_the_project_prepares_all(postgres):
    """With ``OPTIONS['prepare_threshold'] = 0`` psycopg would prepare every server-bound statement. A
    report runs prepared whatever the batch size (planning it was a fifth of the drain at the default batch
    size, and its plan reaches every row by its key); a claim is planned for its own parameters."""
    from django.db import connection

    from backwave_django.core.records import OutcomeKind
    from backwave_django.store import get_store

    from ..contract.support import claim, enqueue, outcome, report

    def prepared() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%backwave%'")
            return [row[0] for row in cursor.fetchall()]

    connection.ensure_connection()
    connection.connection.prepare_threshold = 0  # what the project's OPTIONS would have set
    try:
        store = get_store()
        enqueue(store, 300)
        report(store, *(outcome(job, OutcomeKind.SUCCEEDED) for job in claim(store, max_jobs=300)))
        after_large = prepared()
        for _ in range(3):
            enqueue(store, 2)
            report(store, *(outcome(job, OutcomeKind.SUCCEEDED) for job in claim(store)))
        after_small = prepared()
    finally:
        connection.connection.prepare_threshold = None
    assert after_small == after_large  # one statement text for every batch size
    assert len(after_large) == 2  # the batch enqueue and the report
    [report_statement] = [s for s in after_large if "DELETE FROM backwave_django_lease" in s]
    assert "INSERT INTO backwave_django_outcome" in report_statement
    assert not any("SKIP LOCKED" in s for s in after_large)
    assert Job.objects.filter(state="succeeded").count() == 306


def _fields(job: Job) -> dict[str, object]:
    return {field.attname: getattr(job, field.attname) for field in Job._meta.concrete_fields}


def test_the_jobs_enqueue_many_returns_hold_what_was_stored_each_its_own(db):
    returned = jobs.add.using(priority=3).enqueue_many([(1, 2), {"a": 3, "b": 4}, (5, 6)])
    stored = Job.objects.in_bulk([job.id for job in returned])
    assert len({job.id for job in returned}) == 3
    for job in returned:
        assert _fields(job) == _fields(stored[job.id])
        assert not job._state.adding and job._state.db == "default" and job.duplicate is False
    assert len({id(job._state) for job in returned}) == 3  # no state shared between instances


def test_a_post_init_listener_sees_every_job_enqueue_many_returns(db):
    from django.db.models.signals import post_init

    seen = []

    def listener(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(listener, sender=Job)
    try:
        returned = jobs.add.enqueue_many([(i, i) for i in range(4)])
    finally:
        post_init.disconnect(listener, sender=Job)
    assert all(any(job is instance for instance in seen) for job in returned)
