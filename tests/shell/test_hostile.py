"""Nothing a job carries can stop a worker or lose an outcome: hostile text, undecodable rows, exceptions that
cannot be printed or are not Exceptions, failed outcome writes, hung handlers, handlers that ignore shutdown.

Each test runs real Pumps (threads) against the real database: SQLite, PostgreSQL, MariaDB.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.contrib.auth.models import Group
from django.db import OperationalError
from django.utils import timezone

from backwave_django.core.health import GroupHealth
from backwave_django.core.text import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES
from backwave_django.models import Job, Lease, Outcome, PumpStatus
from backwave_django.store import get_store

from .. import jobs
from .helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def states() -> Counter[str]:
    return Counter(Job.objects.values_list("state", flat=True))


def storable(text: str, limit: int) -> bool:
    return "\x00" not in text and len(text.encode("utf-8")) <= limit


def test_failure_text_the_database_would_refuse_is_stored_cleaned_and_no_pump_halts(settings):
    """NUL characters (PostgreSQL refuses them), a lone surrogate (no encoding takes it) and 100,000
    characters of message: three Pumps keep running and an unrelated success is written once."""
    jobs.calls.clear()
    with running(settings, {"g": group(PUMPS=3, POOL_SIZE=4)}) as node:
        bad = [jobs.hostile_text.enqueue(sku=f"\x00sku-{n}\x00") for n in range(6)]
        good = jobs.noop.enqueue_many([{}] * 30)
        wait_until(lambda: states() == {"dead_lettered": 6, "succeeded": 30}, timeout=30)
        assert [status.state for status in node.health()] == [GroupHealth.RUNNING]
    for job in bad:
        job.refresh_from_db()
        assert job.terminal_cause.startswith(f"ValueError: unknown sku sku-{job.id - bad[0].id}")
        assert "\ufffd" in job.terminal_cause and storable(job.terminal_cause, MAX_MESSAGE_BYTES)
        [outcome] = Outcome.objects.filter(job=job)
        assert storable(outcome.detail, MAX_DETAIL_BYTES)
        assert outcome.detail.rstrip().endswith("x" * 100)  # a long traceback keeps its end
    ran = Counter(job_id for wire, job_id, _ in jobs.calls if wire == "tests.noop")
    assert ran == dict.fromkeys((j.id for j in good), 1)
    assert not PumpStatus.objects.filter(health="halted").exists()


def test_an_exception_whose_str_raises_still_ends_its_attempt(settings):
    with running(settings, {"g": group()}):
        job = jobs.unprintable.enqueue()
        wait_until(lambda: Job.objects.get(id=job.id).state == "dead_lettered", timeout=20)
    job.refresh_from_db()
    assert job.attempt == 2 and job.terminal_cause.startswith("UnprintableError")
    assert list(Outcome.objects.filter(job=job).values_list("kind", flat=True)) == ["failed", "failed"]
    assert not Lease.objects.exists()


@pytest.mark.parametrize(
    ("kind", "cause"),
    [("exit", "SystemExit: 3"), ("interrupt", "KeyboardInterrupt"), ("generator", "GeneratorExit")],
)
def test_a_handler_raising_a_base_exception_fails_its_attempt_and_the_worker_goes_on(settings, kind, cause):
    with running(settings, {"g": group()}) as node:
        job = jobs.raises_base_exception.enqueue(kind=kind)
        wait_until(lambda: Job.objects.get(id=job.id).state == "dead_lettered")
        after = jobs.noop.enqueue()
        wait_until(lambda: Job.objects.get(id=after.id).state == "succeeded")
        assert all(pump.alive for pump in node.pumps)
    assert Job.objects.get(id=job.id).terminal_cause == cause


@pytest.mark.parametrize(("kind", "what"), [("coroutine", "a coroutine"), ("awaitable", "an awaitable")])
def test_a_sync_handler_returning_an_awaitable_fails_its_attempt_and_the_coroutine_is_closed(
    settings, kind, what
):
    """Nothing awaits a synchronous handler's result: its work never ran, so it did not succeed. The coroutine
    is closed (no "never awaited" warning, which the suite turns into an error)."""
    with running(settings, {"g": group()}):
        job = jobs.returns_an_awaitable.enqueue(kind=kind)
        wait_until(lambda: Job.objects.get(id=job.id).state == "dead_lettered")
    cause = Job.objects.get(id=job.id).terminal_cause
    assert cause.startswith(f"HandlerReturnedAwaitable: tests.jobs.returns_an_awaitable returned {what}")
    assert "was it meant to be async?" in cause


def test_a_transient_fault_on_an_outcome_write_keeps_the_outcome_and_writes_it_again(settings, monkeypatch):
    """A success must never be charged an Attempt because its report met a transient error."""
    store_class = type(get_store())
    original = store_class.report
    faults = {"left": 2}

    def flaky_report(self, **kwargs):
        if faults["left"]:
            faults["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return original(self, **kwargs)

    monkeypatch.setattr(store_class, "report", flaky_report)
    with running(settings, {"g": group()}):
        job = jobs.noop.using(max_attempts=1).enqueue()
        wait_until(lambda: Job.objects.get(id=job.id).state != "scheduled" and not Lease.objects.exists())
    job.refresh_from_db()
    assert (job.state, job.attempt) == ("succeeded", 1)
    assert list(Outcome.objects.filter(job=job).values_list("kind", flat=True)) == ["succeeded"]
    assert faults["left"] == 0


def test_a_handler_past_its_timeout_fails_its_attempt_is_cut_off_and_its_thread_replaced(settings):
    """It ignores its timeout and writes a row later: the row is never committed, its job does not wait for
    it, the pool keeps serving, and health says a thread was abandoned until it ends."""
    with running(settings, {"g": group(QUEUES=["slow", "default"], POOL_SIZE=1)}) as node:
        hung = jobs.ignores_cancellation.using(timeout=0.3).enqueue(seconds=4, marker="late")
        started = time.monotonic()
        wait_until(lambda: Job.objects.get(id=hung.id).state == "dead_lettered", timeout=10)
        assert Job.objects.get(id=hung.id).terminal_cause == "timed out after 0.3 s"
        assert not Lease.objects.exists()
        wait_until(lambda: node.health()[0].state == GroupHealth.DEGRADED)
        # The Pump records its new health right after the change, from its own thread: wait for the row too.
        mine = PumpStatus.objects.filter(worker_id=node.pumps[0].worker_id)
        row = wait_until(lambda: mine.filter(health="degraded").first())
        assert "abandoned" in row.detail
        after = jobs.noop.enqueue()  # the pool of one got a replacement thread
        wait_until(lambda: Job.objects.get(id=after.id).state == "succeeded")
        time.sleep(max(0.0, 4.5 - (time.monotonic() - started)))  # the hung handler has woken and tried
        wait_until(lambda: node.health()[0].state == GroupHealth.RUNNING)
    assert not Group.objects.filter(name__startswith="late-").exists()


def test_a_transaction_a_handler_holds_past_its_timeout_is_cut_off_in_time_and_never_commits(settings):
    """The write is already sent when the handler is given up on, so the guard cannot refuse it. The store
    cuts the session off: PostgreSQL terminates it and MariaDB kills it, which rolls it back on the server;
    on SQLite the Pump rolls the handler's transaction back on its connection and makes the connection
    refuse everything but a rollback, which gives back the database's write lock at once. Its job is
    dead-lettered at the deadline plus the grace (not when the handler wakes), health says a thread was
    abandoned meanwhile, and neither the row nor the ``on_commit`` callback ever happens."""
    jobs.on_commit_ran.clear()
    with running(settings, {"g": group(QUEUES=["slow", "default"], POOL_SIZE=1)}) as node:
        held = jobs.holds_a_transaction.using(timeout=0.3).enqueue(seconds=4, marker="uncommitted")
        wait_until(lambda: Lease.objects.filter(job_id=held.id).exists())
        started = time.monotonic()
        wait_until(lambda: Job.objects.get(id=held.id).state == "dead_lettered", timeout=10)
        assert time.monotonic() - started < 3.3  # 0.3 s, the grace (2 s), a write: not the handler's 4 s
        assert Job.objects.get(id=held.id).terminal_cause == "timed out after 0.3 s"
        assert not Lease.objects.exists()
        wait_until(lambda: node.health()[0].state == GroupHealth.DEGRADED, timeout=1)
        time.sleep(max(0.0, 4.5 - (time.monotonic() - started)))  # the handler has woken and left atomic()
        wait_until(lambda: node.health()[0].state == GroupHealth.RUNNING)
        after = jobs.noop.enqueue()  # the database is not locked: the group goes on serving
        wait_until(lambda: Job.objects.get(id=after.id).state == "succeeded")
    assert not Group.objects.filter(name__startswith="uncommitted-").exists()
    assert jobs.on_commit_ran == []


def test_shutdown_cuts_off_a_handler_that_ignores_it_before_giving_its_job_back(settings):
    with running(settings, {"g": group(QUEUES=["slow"])}, grace=0.5):
        job = jobs.ignores_cancellation.enqueue(seconds=4, marker="after-release")
        wait_until(lambda: Lease.objects.count() == 1)
        started = time.monotonic()
    stopped_in = time.monotonic() - started
    assert stopped_in < 5  # the grace (0.5 s), the stop window (2 s), a write
    job.refresh_from_db()
    assert (job.state, job.attempt) == ("scheduled", 0)
    assert list(Outcome.objects.filter(job=job).values_list("kind", flat=True)) == ["released"]
    time.sleep(max(0.0, 4.5 - stopped_in))  # the handler has woken and tried to write
    assert not Group.objects.filter(name__startswith="after-release-").exists()


def test_shutdown_cuts_off_a_handler_holding_a_transaction_in_time_and_nothing_of_it_commits(settings):
    """On SQLite its open transaction holds the write lock the Pump's own writes wait for (its heartbeats, the
    release): the cut-off comes at the end of the stop window all the same, and rolls it back."""
    jobs.on_commit_ran.clear()
    with running(settings, {"g": group(QUEUES=["slow"], HEARTBEAT_INTERVAL=0.2)}, grace=0.5):
        job = jobs.holds_a_transaction.enqueue(seconds=6, marker="shut-down")
        wait_until(lambda: Lease.objects.count() == 1)
        started = time.monotonic()
    stopped_in = time.monotonic() - started
    assert stopped_in < 4  # the grace (0.5 s), the stop window (2 s), a write: not the handler's 6 s
    job.refresh_from_db()
    assert (job.state, job.attempt) == ("scheduled", 0)
    assert list(Outcome.objects.filter(job=job).values_list("kind", flat=True)) == ["released"]
    time.sleep(max(0.0, 6.5 - stopped_in))  # the handler has woken and left atomic()
    assert not Group.objects.filter(name__startswith="shut-down-").exists()
    assert jobs.on_commit_ran == []


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "RecursionError"),
        ('{"a": ' + "7" * 5000 + ', "b": 1}', "digits"),
        ('{"a": {"$bw": "timedelta", "v": [999999999999, 0, 0]}, "b": 1}', "timedelta"),
    ],
    ids=["nested 100,000 deep", "a 5,000-digit int", "an overflowing tagged value"],
)
def test_a_stored_payload_that_fails_to_decode_is_quarantined_without_quoting_it(settings, payload, problem):
    now = timezone.now()
    row = Job.objects.create(wire_name="tests.add", payload=payload, due_at=now, created_at=now)
    with running(settings, {"g": group()}) as node:
        wait_until(lambda: Job.objects.get(id=row.id).state == "quarantined")
        ok = jobs.add.enqueue(a=1, b=2)
        wait_until(lambda: Job.objects.get(id=ok.id).state == "succeeded")
        assert node.pumps[0].health == "running"
    row.refresh_from_db()
    assert "7777" not in row.terminal_cause and "999999999999" not in row.terminal_cause
    assert len(row.terminal_cause) < 300
