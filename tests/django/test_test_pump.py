from datetime import timedelta

from backwave_django.models import Job, Outcome
from backwave_django.testing import TestPump

from .. import jobs


def test_retry_then_success_on_virtual_time(db):
    job = jobs.fail_until.enqueue(succeed_on=3)
    with TestPump() as pump:
        assert [e.outcome for e in pump.run_due()] == ["failed"]
        pump.advance(timedelta(seconds=1))
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
