from datetime import timedelta

import pytest

from backwave_django.models import Job, Outcome
from backwave_django.signals import attempt_finished, attempt_started
from backwave_django.testing import TestPump

from .. import jobs


def test_retry_then_success_on_virtual_time(db):
    job = jobs.fail_until.enqueue(succeed_on=3)
    with TestPump() as pump:
        assert [e.outcome for e in pump.run_due()] == ["failed"]
        assert Job.objects.get(id=job.id).state == Job.State.SCHEDULED
        ran = pump.advance(timedelta(minutes=1))
    assert [e.outcome for e in ran] == ["failed", "succeeded"]
    job.refresh_from_db()
    assert (job.state, job.attempt) == (Job.State.SUCCEEDED, 3)
    assert list(Outcome.objects.filter(job=job).values_list("kind", flat=True).order_by("attempt")) == [
        "failed",
        "failed",
        "succeeded",
    ]


def test_fixture_dead_letters_at_the_ceiling(backwave_pump):
    job = jobs.always_fails.enqueue()
    backwave_pump.advance(timedelta(hours=1))
    job.refresh_from_db()
    assert job.state == Job.State.DEAD_LETTERED
    assert job.attempt == 2
    assert "ValueError: always" in job.terminal_cause


def test_a_job_enqueued_after_the_pump_was_made_is_due_at_once(backwave_pump):
    job = jobs.add.enqueue(a=1, b=2)
    assert [e.outcome for e in backwave_pump.run_due()] == ["succeeded"]
    assert Job.objects.get(id=job.id).state == Job.State.SUCCEEDED


def test_a_handler_that_breaks_the_transaction_fails_only_its_attempt(db):
    from django.contrib.auth.models import Group

    from backwave_django import job
    from backwave_django.registry import registry

    Group.objects.create(name="taken")

    @job("tests.duplicate-group", max_attempts=1)
    def duplicate() -> None:
        Group.objects.create(name="taken")  # IntegrityError: breaks the transaction on PostgreSQL

    try:
        created = duplicate.enqueue()
        with TestPump() as pump:
            assert [e.outcome for e in pump.run_due()] == ["failed"]
        stored = Job.objects.get(id=created.id)
        assert stored.state == Job.State.DEAD_LETTERED
        assert "IntegrityError" in stored.terminal_cause
        assert "Traceback" in Outcome.objects.get(job=stored).detail
    finally:
        registry.unregister("tests.duplicate-group")


def test_a_weighted_policy_shares_the_pool_six_three_one_on_the_real_store(db):
    from backwave_django.core.dispatch import Weighted

    for queue, count in (("a", 600), ("b", 300), ("c", 100)):
        jobs.noop.using(queue=queue).enqueue_many([{}] * count)
    with TestPump(policy=Weighted((("a", 6), ("b", 3), ("c", 1))), pool_size=10, max_claim_batch=10) as pump:
        ran = pump.run_due()
    queue_of = dict(Job.objects.values_list("id", "queue"))
    order = [queue_of[e.job_id] for e in ran]
    assert len(order) == 1000
    for done in range(10, 1001, 10):  # at every point of the run the shares stay within a pass of 6:3:1
        prefix = order[:done]
        for queue, weight in (("a", 6), ("b", 3), ("c", 1)):
            assert abs(prefix.count(queue) - done * weight / 10) <= 10, (done, queue)


@pytest.fixture
def attempt_signals():
    """Every attempt signal sent, in order, as (signal, job, attempt)."""
    seen: list[tuple[str, int, int]] = []

    def started(sender, context, **kwargs):
        seen.append(("started", context.job_id, context.attempt))

    def finished(sender, context, **kwargs):
        seen.append(("finished", context.job_id, context.attempt))

    attempt_started.connect(started)
    attempt_finished.connect(finished)
    yield seen
    attempt_started.disconnect(started)
    attempt_finished.disconnect(finished)


def test_the_test_pump_sends_both_attempt_signals_around_every_handler_call(db, attempt_signals):
    job = jobs.fail_until.enqueue(succeed_on=2)
    with TestPump() as pump:
        assert [e.outcome for e in pump.advance(timedelta(minutes=1))] == ["failed", "succeeded"]
    assert attempt_signals == [
        ("started", job.id, 1),
        ("finished", job.id, 1),
        ("started", job.id, 2),
        ("finished", job.id, 2),
    ]


def test_a_start_receiver_that_raises_fails_the_attempt_as_in_a_worker(db, attempt_signals):
    def refuse(sender, context, **kwargs):
        raise RuntimeError("not today")

    attempt_started.connect(refuse)
    try:
        job = jobs.add.using(max_attempts=1).enqueue(a=1, b=2)
        with TestPump() as pump:
            (ran,) = pump.run_due()
    finally:
        attempt_started.disconnect(refuse)
    assert (ran.outcome, str(ran.error)) == ("failed", "not today")
    assert attempt_signals == [("started", job.id, 1), ("finished", job.id, 1)]
    assert "RuntimeError: not today" in Job.objects.get(id=job.id).terminal_cause


def test_the_test_pump_fails_a_sync_handler_that_returns_a_coroutine(db):
    job = jobs.returns_an_awaitable.enqueue(kind="coroutine")
    with TestPump() as pump:
        [execution] = pump.run_due()
    assert execution.outcome == "failed"
    assert "returned a coroutine" in Job.objects.get(id=job.id).terminal_cause
