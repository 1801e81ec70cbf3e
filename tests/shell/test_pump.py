"""The threaded Pump on the real database (SQLite and PostgreSQL): draining, hints, faults, shutdown."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from backwave_django.core import elastic
from backwave_django.models import Job, Lease, Outcome, PumpStatus
from backwave_django.store import get_store
from backwave_django.store.django import DjangoStore

from .. import jobs
from .helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def states() -> Counter[str]:
    return Counter(Job.objects.values_list("state", flat=True))


def test_several_pumps_and_groups_drain_every_job_exactly_once(settings):
    groups = {
        "first": group(PUMPS=3, POOL_SIZE=4, MAX_CLAIM_BATCH=3),
        "second": group(QUEUES=["other"], PUMPS=2, POOL_SIZE=5),
    }
    with running(settings, groups) as node:
        jobs.noop.enqueue_many([{}] * 300)
        jobs.noop.using(queue="other").enqueue_many([{}] * 200)
        wait_until(lambda: states() == {"succeeded": 500}, timeout=60)
        assert len(node.pumps) == 5
    assert set(Job.objects.values_list("attempt", flat=True)) == {1}
    per_job = Counter(Outcome.objects.values_list("job_id", flat=True))
    assert len(per_job) == 500 and set(per_job.values()) == {1}
    workers = set(Outcome.objects.values_list("worker", flat=True))
    assert len(workers) >= 2  # the work was shared, with no coordination beyond the row locks


def test_a_hint_wakes_an_idle_pump_long_before_its_poll_interval(settings):
    with running(settings, {"g": group(POLL_INTERVAL=30)}):
        time.sleep(0.3)  # the first poll has come and gone; the next tick is 30 s away
        job = jobs.noop.enqueue()
        wait_until(lambda: Job.objects.get(id=job.id).state == "succeeded", timeout=5)


def test_without_hints_an_idle_pump_waits_for_its_poll_tick(settings):
    with running(settings, {"g": group(POLL_INTERVAL=3)}, hints=False):
        time.sleep(0.8)  # well past the first poll, even on a loaded machine; the next is at 3 s
        job = jobs.noop.enqueue()
        time.sleep(0.5)
        assert Job.objects.get(id=job.id).state == "scheduled"
        wait_until(lambda: Job.objects.get(id=job.id).state == "succeeded", timeout=8)


def test_unroutable_rows_are_quarantined_and_the_pump_keeps_running(settings):
    now = timezone.now()
    unknown = Job.objects.create(wire_name="tests.never-registered", due_at=now, created_at=now)
    undecodable = Job.objects.create(wire_name="tests.add", payload="{not json", due_at=now, created_at=now)
    misfit = Job.objects.create(wire_name="tests.add", payload='{"a": 1}', due_at=now, created_at=now)
    with running(settings, {"g": group()}) as node:
        ok = jobs.add.enqueue(a=1, b=2)
        wait_until(lambda: Job.objects.filter(state__in=["quarantined", "succeeded"]).count() == 4)
        assert node.pumps[0].health == "running"
    for job, reason in [
        (unknown, "no job is registered"),
        (undecodable, "not valid JSON"),
        (misfit, "does not fit"),
    ]:
        job.refresh_from_db()
        assert job.state == "quarantined" and reason in job.terminal_cause
        assert job.attempt == 1
    assert Job.objects.get(id=ok.id).state == "succeeded"


def test_failures_retry_with_backoff_then_dead_letter_at_the_ceiling(settings):
    with running(settings, {"g": group()}):
        flaky = jobs.fail_until.enqueue(succeed_on=3)
        doomed = jobs.always_fails.enqueue()
        wait_until(lambda: states() == {"succeeded": 1, "dead_lettered": 1}, timeout=20)
    flaky.refresh_from_db()
    doomed.refresh_from_db()
    assert (flaky.attempt, doomed.attempt) == (3, 2)
    assert doomed.terminal_cause == "ValueError: always"
    detail = Outcome.objects.filter(job=doomed).last().detail
    assert "Traceback" in detail and "ValueError: always" in detail


def test_graceful_shutdown_lets_short_jobs_finish(settings):
    with running(settings, {"g": group(POOL_SIZE=4)}, grace=10):
        jobs.sleep.using(queue="default").enqueue_many([{"seconds": 0.5}] * 3)
        wait_until(lambda: Lease.objects.count() == 3)
    assert states() == {"succeeded": 3}


def test_graceful_shutdown_releases_what_outlives_the_grace_period_without_charging_an_attempt(settings):
    with running(settings, {"g": group(POOL_SIZE=4)}, grace=0.3):
        jobs.sleep.using(queue="default").enqueue_many([{"seconds": 60}] * 2)
        wait_until(lambda: Lease.objects.count() == 2)
    assert states() == {"scheduled": 2}
    assert set(Job.objects.values_list("attempt", flat=True)) == {0}
    assert not Lease.objects.exists()
    assert Counter(Outcome.objects.values_list("kind", flat=True)) == {"released": 2}
    assert all(due <= timezone.now() for due in Job.objects.values_list("due_at", flat=True))


def test_a_shorter_grace_asked_later_ends_a_pumps_drain_sooner(settings):
    """A Pump letting go drains with its group's SHUTDOWN_GRACE; the node's stop may then bring it forward."""
    started = time.monotonic()
    with running(settings, {"g": group(POOL_SIZE=4, SHUTDOWN_GRACE=30)}, grace=0.3) as node:
        jobs.sleep.using(queue="default").enqueue_many([{"seconds": 60}] * 2)
        wait_until(lambda: Lease.objects.count() == 2)
        node.pumps[0].shutdown(timedelta(seconds=30))  # as when it lets go
    assert time.monotonic() - started < 15  # not the first request's 30 s
    assert states() == {"scheduled": 2}
    assert Counter(Outcome.objects.values_list("kind", flat=True)) == {"released": 2}


def test_a_halted_pump_leaves_its_siblings_running(settings, monkeypatch):
    StoreClass = type(get_store())
    original = StoreClass.claim

    def broken_claim(self, **kwargs):
        if self.__dict__.get("broken"):
            raise RuntimeError("an invariant broke")
        return original(self, **kwargs)

    monkeypatch.setattr(StoreClass, "claim", broken_claim)
    settings.BACKWAVE = {"GROUPS": {"g": group(PUMPS=2)}}
    from backwave_django.shell.node import Node

    node = Node(["g"], reconnect_delay=0.2)
    node.pumps[0].store.broken = True
    node.start()
    try:
        wait_until(lambda: node.pumps[0].health == "halted")
        jobs.noop.enqueue_many([{}] * 40)
        wait_until(lambda: states() == {"succeeded": 40})
        assert node.pumps[1].health == "running"
        assert [h.state for h in node.health()] == ["partially halted"]
        row = PumpStatus.objects.get(worker_id=node.pumps[0].worker_id)
        assert row.health == "halted" and "invariant broke" in row.detail
    finally:
        node.stop(1)


def test_a_transient_fault_degrades_the_pump_which_then_recovers(settings, monkeypatch):
    StoreClass = type(get_store())
    faults = {"left": 3}
    original = StoreClass.claim

    def flaky_claim(self, **kwargs):
        if faults["left"]:
            faults["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return original(self, **kwargs)

    monkeypatch.setattr(StoreClass, "claim", flaky_claim)
    seen = []
    with running(settings, {"g": group()}) as node:
        pump = node.pumps[0]
        wait_until(lambda: seen.append(pump.health) or faults["left"] == 0)
        jobs.noop.enqueue_many([{}] * 10)
        wait_until(lambda: states() == {"succeeded": 10})
        assert pump.health == "running"
    assert "degraded" in seen


def test_an_operator_cancel_reaches_a_running_handler_at_its_next_heartbeat(settings):
    with running(settings, {"g": group(LEASE_DURATION=3, HEARTBEAT_INTERVAL=0.1)}):
        job = jobs.sleep.using(queue="default").enqueue(seconds=60)
        wait_until(lambda: Lease.objects.filter(job_id=job.id).exists())
        assert DjangoStore().cancel(job.id, actor="tests", now=timezone.now()) == "requested"
        wait_until(lambda: Job.objects.get(id=job.id).state == "cancelled", timeout=10)
    assert Outcome.objects.get(job=job).kind == "cancelled"


def test_a_pump_that_lost_a_lease_abandons_the_execution_and_drops_its_result(settings):
    with running(settings, {"g": group(LEASE_DURATION=3, HEARTBEAT_INTERVAL=0.1)}) as node:
        job = jobs.sleep.using(queue="default").enqueue(seconds=60)
        wait_until(lambda: Lease.objects.filter(job_id=job.id).exists())
        Lease.objects.filter(job_id=job.id).update(owner="someone-else")  # as if a sweeper re-leased it
        wait_until(lambda: not node.pumps[0].busy, timeout=10)
    assert Job.objects.get(id=job.id).state == "leased"  # still the other owner's
    assert not Outcome.objects.filter(job=job).exists()


def one_writer() -> bool:
    return get_store().one_writer_at_a_time


@pytest.fixture
def full_claims_starve(monkeypatch):
    """Count every full claim as starved, however few it asked for. Whether a claim asks for half a pool
    depends on how the machine schedules the handler threads (under load they finish one at a time, and
    the claims that follow ask for one): the Core's rule is tested in tests/core/test_elastic.py and by the
    simulator; these tests are about the node's growing and letting go, so they must not hang on timing."""

    def observe(self, asked: int, got: int, now) -> None:
        if got and got >= asked:
            self.streak, self.last_starved = self.streak + 1, now
        else:
            self.streak = 0

    monkeypatch.setattr(elastic.Starvation, "observe", observe)


@pytest.mark.skipif("one_writer()", reason="SQLite takes one writer at a time: a backlog adds no Pump")
def test_a_backlog_of_short_jobs_adds_a_pump_which_lets_go_once_it_is_worked_off(
    settings, monkeypatch, full_claims_starve
):
    monkeypatch.setattr(elastic, "RETIRE_AFTER", timedelta(seconds=0.3))
    jobs.noop.enqueue_many([{}] * 400)
    seen = set()

    def adapted() -> int:
        node.adapt()  # what backwave_pump does every tick
        seen.add(len(node.pumps))
        return len(node.pumps) + len(node.leaving)

    with running(settings, {"g": group(POOL_SIZE=4, MAX_CLAIM_BATCH=4)}) as node:  # MAX_PUMPS: 2 by default
        wait_until(lambda: adapted() and states() == {"succeeded": 400}, timeout=60)
        assert seen == {1, 2}  # grown by one, to MAX_PUMPS and no further
        wait_until(lambda: adapted() == 1, timeout=10)  # the extra one has let go and ended
        assert node.processed == 400
        assert list(PumpStatus.objects.values_list("worker_id", flat=True)) == [node.pumps[0].worker_id]
    assert set(Job.objects.values_list("attempt", flat=True)) == {1}
    per_job = Counter(Outcome.objects.values_list("job_id", flat=True))
    assert len(per_job) == 400 and set(per_job.values()) == {1}
    assert len(set(Outcome.objects.values_list("worker", flat=True))) == 2


@pytest.mark.skipif("one_writer()", reason="SQLite takes one writer at a time: a backlog adds no Pump")
def test_a_pump_that_cannot_be_added_leaves_the_group_as_it_is(
    settings, monkeypatch, caplog, full_claims_starve
):
    from backwave_django.shell.pump import Pump

    original = Pump.start

    def no_thread(self):
        if self.index > 0:
            raise RuntimeError("can't start new thread")
        original(self)

    monkeypatch.setattr(Pump, "start", no_thread)
    jobs.noop.enqueue_many([{}] * 300)
    with running(settings, {"g": group(POOL_SIZE=4, MAX_CLAIM_BATCH=4)}) as node:
        wait_until(lambda: node.adapt() or states() == {"succeeded": 300}, timeout=60)
        assert len(node.pumps) == 1
    assert "could not add a pump to group g, which stays fixed: RuntimeError" in caplog.text


@pytest.mark.parametrize("max_pumps", [1, 2])
def test_a_group_whose_max_pumps_is_its_pumps_never_grows_nor_one_on_sqlite(settings, max_pumps):
    if max_pumps == 2 and not one_writer():
        pytest.skip("grows: the test above")
    jobs.noop.enqueue_many([{}] * 200)
    with running(settings, {"g": group(POOL_SIZE=4, MAX_CLAIM_BATCH=4, MAX_PUMPS=max_pumps)}) as node:
        wait_until(lambda: node.adapt() or states() == {"succeeded": 200}, timeout=60)
        assert len(node.pumps) == 1 and not node.leaving


def test_a_burst_run_over_a_backlog_grows_its_group_and_counts_every_pumps_outcomes(
    settings, capsys, full_claims_starve
):
    from django.core.management import call_command

    fast = {"QUEUES": ["default"], "POLL_INTERVAL": 0.05, "POOL_SIZE": 4, "MAX_CLAIM_BATCH": 4}
    settings.BACKWAVE = {"GROUPS": {"default": fast}}
    jobs.noop.enqueue_many([{}] * 600)
    call_command("backwave_pump", "--burst", "--grace", "0", "--burst-horizon", "0", "--no-hints")
    out = capsys.readouterr().out
    pumps = 1 if one_writer() else 2  # grown to MAX_PUMPS (2 by default), and not let go within 30 s
    assert f"group default: stopped, {pumps} pump(s)" in out and "600 outcomes applied" in out
    assert states() == {"succeeded": 600}
