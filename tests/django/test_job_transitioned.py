"""The test pump sends ``job_transitioned`` as the workers do: through the database store at each commit, and
through a memory store it is given."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.states import State
from backwave_django.signals import job_transitioned
from backwave_django.store.memory import MemoryStore
from backwave_django.testing import TestPump

from .. import jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard():
    got: list[tuple[str, State | None, State]] = []

    def receiver(sender, operation, from_state, to_state, wire_name, **kwargs):
        if wire_name in ("tests.fail-until", "tests.noop"):  # not the runs the settings schedule
            got.append((operation, from_state, to_state))

    job_transitioned.connect(receiver, dispatch_uid="tests.pump-heard")
    yield got
    job_transitioned.disconnect(dispatch_uid="tests.pump-heard")


def test_the_test_pump_announces_each_change_of_a_job_it_runs(heard, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        jobs.fail_until.enqueue(succeed_on=2)
        pump = TestPump()
        pump.run_due()
        pump.advance(timedelta(hours=1))  # past the retry's backoff
    assert heard == [
        ("enqueue", None, State.SCHEDULED),
        ("claim", State.SCHEDULED, State.LEASED),
        ("report", State.LEASED, State.SCHEDULED),
        ("claim", State.SCHEDULED, State.LEASED),
        ("report", State.LEASED, State.SUCCEEDED),
    ]


def test_a_memory_store_given_to_the_test_pump_announces_too(heard):
    store = MemoryStore()
    with TestPump(store=store) as pump:
        store.enqueue([pump_job()], now=pump.now, max_payload_bytes=65536)
        pump.run_due()
    assert heard[0] == ("enqueue", None, State.SCHEDULED) and heard[-1][2] is State.SUCCEEDED


def pump_job():
    from datetime import UTC, datetime

    from backwave_django.store import NewJob

    return NewJob(
        wire_name="tests.noop",
        payload="{}",
        queue="default",
        due_at=datetime(2020, 1, 1, tzinfo=UTC),
        max_attempts=1,
    )
