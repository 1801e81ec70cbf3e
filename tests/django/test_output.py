"""Return values through the test pump: stored with the success, decoded by ``Job.output``, bounded; one that
cannot be stored fails its Attempt with a cause that says why. Async handlers run under the test pump too."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from django.utils import timezone

from backwave_django.models import Job, Outcome
from backwave_django.testing import TestPump

from .. import jobs

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "value",
    [42, "text", [1, 2, 3], {"a": {"b": None}}, decimal.Decimal("1.10"), dt.date(2026, 12, 1), (1, "two")],
)
def test_a_return_value_is_stored_with_the_success_and_decoded_by_job_output(value):
    job = jobs.returns.enqueue(value=value)

    TestPump().run_due()

    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED
    assert job.output == value and type(job.output) is type(value)


def test_returning_none_stores_nothing():
    job = jobs.noop.enqueue()

    TestPump().run_due()

    job.refresh_from_db()
    assert (job.state, job.output_json, job.output) == (Job.State.SUCCEEDED, None, None)


def test_a_return_value_that_cannot_be_stored_fails_the_attempt_and_says_why():
    job = jobs.returns_unstorable.enqueue()

    TestPump().run_due()

    job.refresh_from_db()
    assert job.state == Job.State.DEAD_LETTERED
    assert job.output_json is None
    assert "the return value['not'][0] is a tests.jobs.Unstorable" in job.terminal_cause
    assert Outcome.objects.get(job=job).error_type == "backwave_django.shell.executor.OutputError"


def test_a_return_value_over_max_output_bytes_fails_the_attempt(settings):
    settings.BACKWAVE = {"MAX_OUTPUT_BYTES": 1000}
    small, big = jobs.returns_big.enqueue(size=900), jobs.returns_big.enqueue(size=1000)

    TestPump().run_due()

    small.refresh_from_db(), big.refresh_from_db()
    assert small.state == Job.State.SUCCEEDED and len(small.output) == 900
    assert big.state == Job.State.DEAD_LETTERED
    assert "1002 bytes encoded; the limit is 1000 (BACKWAVE['MAX_OUTPUT_BYTES'])" in big.terminal_cause


def test_a_failed_attempt_records_its_exception_class_and_when_it_began():
    job = jobs.always_fails.enqueue()
    started = timezone.now() + dt.timedelta(seconds=1)

    TestPump(start=started).run_due()

    first = Outcome.objects.filter(job=job).order_by("attempt").first()
    assert first is not None
    assert (first.error_type, first.started_at) == ("builtins.ValueError", started)


def test_the_test_pump_runs_async_handlers_and_stores_what_they_return():
    added, orm, failing = (
        jobs.async_add.enqueue(a=2, b=3),
        jobs.async_orm.enqueue(name="tp"),
        jobs.async_fails.enqueue(),
    )

    TestPump().run_due()

    for job in (added, orm, failing):
        job.refresh_from_db()
    assert (added.state, added.output) == (Job.State.SUCCEEDED, 5)
    assert (orm.state, orm.output) == (Job.State.SUCCEEDED, 1)  # its write is in the test's transaction
    assert failing.state == Job.State.SCHEDULED  # failed once, retried later
    assert Outcome.objects.get(job=failing).error_type == "builtins.LookupError"
