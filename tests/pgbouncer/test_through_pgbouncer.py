"""Everything a project does with backwave, through PgBouncer in transaction pooling mode: enqueue, claim,
report, heartbeats and the lease sweep, operator actions, the workers themselves, the admin; prepared
statements handled both ways; wake-up hints over a direct connection, or polling when there is none."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connections
from django.utils import timezone

from backwave_django.core.records import OutcomeKind
from backwave_django.models import Job
from backwave_django.shell.listener import HintListener
from backwave_django.store import get_store
from backwave_django.store.contract import CancelResult, RequeueResult
from backwave_django.store.postgres import POOLER_HINT, PostgresStore

from .. import jobs
from ..contract.support import RETRY, claim, enqueue, outcome, report
from ..shell.helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("through_bouncer")]


def test_the_default_alias_really_goes_through_the_bouncer(through_bouncer):
    store = get_store()
    assert isinstance(store, PostgresStore)
    assert connections["default"].settings_dict["PORT"] == str(through_bouncer.port)
    assert store.behind_pooler()


def test_enqueue_claim_heartbeat_report_and_sweep_through_the_bouncer():
    for _ in range(3):  # one at a time: the prepared statement (or not) on whatever server connection
        jobs.noop.enqueue()
    jobs.noop.enqueue_many([{}] * 5)
    store, now = get_store(), timezone.now()
    claimed = claim(store, max_jobs=8, now=now)
    assert len(claimed) == 8
    beats = store.heartbeat(
        worker_id="host:1:default:a",
        job_ids=[c.id for c in claimed],
        lease_duration=timedelta(minutes=1),
        now=now,
    )
    assert all(b.renewed for b in beats)
    done = report(store, *(outcome(c, OutcomeKind.SUCCEEDED) for c in claimed[:7]), now=now)
    assert len(done.applied) == 7
    later = now + timedelta(minutes=5)  # the last lease lapsed: the sweep ends its Attempt
    assert store.expire_leases(queues=["default"], max_jobs=10, retry=RETRY, now=later) == 1
    states = sorted(Job.objects.values_list("state", flat=True))
    assert states == ["scheduled"] + ["succeeded"] * 7


def test_a_batch_in_parts_goes_through_the_bouncer_whole_or_not_at_all():
    """The parts share one transaction: the bouncer keeps one server connection for it."""
    from backwave_django import codec
    from backwave_django.store.postgres import PART

    created = jobs.add.enqueue_many([(n, n) for n in range(2 * PART + 1)])
    assert [j.id for j in created] == list(Job.objects.order_by("id").values_list("id", flat=True))
    bad: list[tuple[object, ...]] = [(n, n) for n in range(2 * PART + 1)]
    bad[-1] = (1, object())
    with pytest.raises(codec.PayloadError, match=f"call {2 * PART}"):
        jobs.add.enqueue_many(bad)
    assert Job.objects.count() == 2 * PART + 1


def test_operator_actions_take_their_transaction_scoped_locks_through_the_bouncer():
    store, now = get_store(), timezone.now()
    [first, second] = enqueue(store, 2, now=now)
    store.pause_queue("default", actor="ops", now=now)
    assert claim(store, now=now) == []
    store.set_concurrency_limit("default", 1, actor="ops", now=now)
    store.resume_queue("default", actor="ops", now=now)
    [held] = claim(store, now=now)
    assert store.cancel(held.id, actor="ops", now=now) is CancelResult.REQUESTED
    other = second.id if held.id == first.id else first.id
    assert store.cancel(other, actor="ops", now=now) is CancelResult.CANCELLED
    assert store.requeue(other, actor="ops", now=now) is RequeueResult.NOT_REQUEUEABLE
    assert [a.action for a in store.list_audit()] == [
        "pause_queue", "set_concurrency_limit", "resume_queue", "cancel", "cancel",
    ]  # fmt: skip


def test_workers_run_jobs_through_the_bouncer_with_hints_over_a_direct_connection(settings, direct):
    more = {"PREPARED_STATEMENTS": settings.BACKWAVE["PREPARED_STATEMENTS"], "LISTEN_DATABASE": direct}
    with running(settings, {"g": group(POLL_INTERVAL=30, PUMPS=2, LEASE_DURATION=2)}, more=more) as node:
        assert node.listener is not None and node.listener.using == "direct"
        assert node.listener.connected.wait(10) and not node.listener.unusable.is_set()
        time.sleep(0.3)  # the first polls are over: from now on only a hint wakes the Pumps
        created = jobs.sleep.using(queue="default").enqueue_many([{"seconds": 0.7}] * 10)  # heartbeats too
        wait_until(lambda: Job.objects.filter(state="succeeded").count() == 10, timeout=20)
        assert node.listener.received >= 1
    assert {Job.objects.get(id=job.id).attempt for job in created} == {1}


def test_without_a_direct_connection_the_listener_finds_it_cannot_hear_and_the_pumps_poll(settings, caplog):
    listener = HintListener(reconnect_delay=0.1)
    listener.start()
    try:
        assert listener.unusable.wait(15), "the probe should find that no NOTIFY reaches a pooled LISTEN"
    finally:
        listener.stop()
    assert "wake-up hints from other processes are OFF" in caplog.text
    more = {"PREPARED_STATEMENTS": settings.BACKWAVE["PREPARED_STATEMENTS"]}
    with running(settings, {"g": group(POLL_INTERVAL=0.2)}, more=more):
        job = jobs.noop.enqueue()
        wait_until(lambda: Job.objects.get(id=job.id).state == "succeeded", timeout=10)


def test_the_admin_renders_through_the_bouncer(client):
    jobs.noop.enqueue_many([{}] * 3)
    admin = User.objects.create_superuser("admin", "admin@example.com", "pw")
    client.force_login(admin)
    for page in ("/admin/backwave_django/job/", "/admin/backwave_django/queuesettings/",
                 "/admin/backwave_django/pumpstatus/", "/admin/backwave_django/joboverview/"):  # fmt: skip
        assert client.get(page).status_code == 200, page


def test_a_given_up_handler_is_cancelled_not_terminated_behind_the_bouncer():
    """Behind a pooler the backend pid a connection was told is made up: terminating it could end another
    session. The store cancels the statement instead, which PgBouncer forwards to the right server."""
    started, failed = threading.Event(), []

    def handler() -> None:
        session = connections["default"]
        try:
            with session.cursor() as cursor:
                started.set()
                cursor.execute("SELECT pg_sleep(20)")
        except DatabaseError as exc:
            failed.append(exc)
        finally:
            session.close()

    thread = threading.Thread(target=handler)
    sessions: list[object] = []
    original = connections.create_connection

    def keep(alias: str):
        made = original(alias)
        sessions.append(made)
        return made

    connections.create_connection = keep  # type: ignore[method-assign]
    try:
        thread.start()
        assert started.wait(10)
        time.sleep(0.3)  # the statement is running
        began = time.monotonic()
        get_store().cut_off_sessions(sessions)
        thread.join(10)
    finally:
        connections.create_connection = original  # type: ignore[method-assign]
    assert failed and "cancel" in str(failed[0]).lower()
    assert time.monotonic() - began < 5


def test_prepared_statements_without_max_prepared_statements_fail_with_the_pooler_hint(
    through_bouncer, settings
):
    """What PREPARED_STATEMENTS = False is for: a prepared enqueue that lands on another server connection."""
    if through_bouncer.prepared:
        pytest.skip("with max_prepared_statements PgBouncer keeps them: nothing to show")
    settings.BACKWAVE = {"PREPARED_STATEMENTS": True}
    jobs.noop.enqueue()  # prepares the statement on one server connection, then gives it back
    holder = connections.create_connection("default")  # another client holds that server connection
    holder.ensure_connection()
    holder.set_autocommit(False)
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT 1")
        with pytest.raises(DatabaseError) as raised:
            jobs.noop.enqueue()  # gets another server connection, where the statement does not exist
        assert POOLER_HINT in "\n".join(getattr(raised.value, "__notes__", []))
    finally:
        holder.rollback()
        holder.close()
