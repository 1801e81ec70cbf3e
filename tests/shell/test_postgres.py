"""PostgreSQL only: LISTEN/NOTIFY hints, the database dropping connections, and the connection footprint."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import psycopg
import pytest
from django.db import connection

from backwave_django import wakeups
from backwave_django.models import Job
from backwave_django.shell.listener import HintListener

from .. import jobs
from .helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("postgres")]


def database_name() -> str:
    return str(connection.settings_dict["NAME"])


def other_connection() -> psycopg.Connection:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=True)


def test_the_listener_turns_a_notify_from_another_connection_into_a_hint():
    woken = threading.Event()
    token = wakeups.subscribe(["default"], woken.set)
    listener = HintListener(reconnect_delay=0.1)
    listener.start()
    try:
        assert listener.connected.wait(5)
        with other_connection() as conn:
            conn.execute("SELECT pg_notify('backwave', 'default')")
        assert woken.wait(5)
    finally:
        wakeups.unsubscribe(token)
        listener.stop()


def test_a_stop_wakes_the_listener_at_once_instead_of_waiting_for_a_notification():
    from backwave_django.shell import listener as module

    listener = HintListener(reconnect_delay=0.1)
    listener.start()
    assert listener.connected.wait(5)
    time.sleep(0.2)  # the thread is waiting for a notification now
    started = time.monotonic()
    listener.stop()
    assert not listener._thread.is_alive()
    assert time.monotonic() - started < module.WAIT_SECONDS / 2  # not the end of its wait: woken


def test_enqueue_notifies_only_when_its_transaction_commits():
    from django.db import transaction

    with other_connection() as conn:
        conn.execute("LISTEN backwave")
        with transaction.atomic():
            jobs.noop.enqueue()
            assert list(conn.notifies(timeout=0.3)) == []
        payloads = [n.payload for n in conn.notifies(timeout=2, stop_after=1)]
    assert payloads == ["default"]


def test_a_killed_listener_reconnects_and_pumps_keep_working_meanwhile(settings):
    with running(settings, {"g": group(POLL_INTERVAL=0.3)}) as node:
        listener = node.listener
        assert listener is not None and listener.connected.wait(5)
        killed = listener.backend_pid
        with other_connection() as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", [killed])
        job = jobs.noop.enqueue()  # found by polling even while the listener is down
        wait_until(lambda: Job.objects.get(id=job.id).state == "succeeded", timeout=5)
        wait_until(lambda: listener.connected.is_set() and listener.backend_pid != killed, timeout=5)


def test_pumps_ride_out_the_database_dropping_every_connection(settings):
    with running(settings, {"g": group(PUMPS=2, POOL_SIZE=4, LEASE_DURATION=2)}) as node:
        jobs.sleep.using(queue="default").enqueue_many([{"seconds": 0.01}] * 300)
        time.sleep(0.3)
        for _ in range(3):  # as a server restart does: every backend of this database goes away
            with other_connection() as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    [database_name()],
                )
            time.sleep(0.2)
        connection.close()
        wait_until(lambda: not Job.objects.exclude(state="succeeded").exists(), timeout=90)
        assert [p.health for p in node.pumps] == ["running", "running"]


def test_a_pump_on_a_server_gone_read_only_25006_degrades_and_recovers_instead_of_halting(settings):
    """As after a failover onto a standby: every new session is read-only, so each write the Pump tries
    fails with SQLSTATE 25006. The Pump degrades, backs off and reconnects; once writes work again it runs
    the job it could not claim."""
    name = database_name()
    job = jobs.noop.enqueue()
    with other_connection() as admin:
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        try:
            with running(settings, {"g": group()}, hints=False) as node:
                wait_until(lambda: node.pumps[0].health == "degraded", timeout=10)
                assert Job.objects.get(id=job.id).state == "scheduled"
                admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
                wait_until(lambda: Job.objects.get(id=job.id).state == "succeeded", timeout=20)
                wait_until(lambda: node.pumps[0].health == "running")
                assert node.pumps[0].alive
        finally:
            admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_connections_stay_bounded_by_the_pool_and_none_is_left_idle_in_transaction(settings, kind):
    pool_size = 8
    samples: list[tuple[int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        with other_connection() as conn:
            while not stop.is_set():
                row = conn.execute(
                    # A transaction left open by a handler would sit idle; our own transactions
                    # pass through "idle in transaction" between statements, so count only the
                    # ones idle for over a second.
                    "SELECT count(*), count(*) FILTER (WHERE state LIKE 'idle in transaction%%' "
                    "AND now() - state_change > interval '1 second') "
                    "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [database_name()],
                ).fetchone()
                samples.append((row[0], row[1]))
                time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    with running(settings, {"g": group(POOL_SIZE=pool_size)}):
        sampler.start()
        if kind == "sync":
            jobs.orm_query.enqueue_many([{"n": n} for n in range(2000)])
        else:  # each async Attempt's ORM calls run on a thread and connection of its own
            jobs.async_orm.enqueue_many([{"name": f"conn-{n % 7}"} for n in range(2000)])
        jobs.raise_mid_transaction.using(max_attempts=1).enqueue_many([{}] * 20)
        connection.close()
        wait_until(
            lambda: not Job.objects.exclude(state__in=["succeeded", "dead_lettered"]).exists(), timeout=120
        )
        connection.close()
    stop.set()
    sampler.join()
    peak = max(total for total, _ in samples)
    print(f"\nconnections: peak {peak} for pool size {pool_size} over {len(samples)} samples")
    # pool threads + the pump's own + the listener + this test's own + slack for a closing connection
    assert peak <= pool_size + 4
    assert all(idle == 0 for _, idle in samples)  # at no point was a transaction left open
    assert Job.objects.filter(state="succeeded").count() == 2000


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("BACKWAVE_TEST_PG_RESTART") != "1" or not shutil.which("pg_ctlcluster"),
    reason="restarts the PostgreSQL server: opt in with BACKWAVE_TEST_PG_RESTART=1 (scripts/test does)",
)
def test_a_running_pump_survives_a_real_server_restart(settings):
    version = subprocess.run(
        ["pg_lsclusters", "-h"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    with running(settings, {"g": group(POOL_SIZE=4, LEASE_DURATION=3)}) as node:
        jobs.sleep.using(queue="default").enqueue_many([{"seconds": 0.01}] * 200)
        connection.close()
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast"],
            check=True,
            timeout=60,
        )
        wait_until(lambda: not Job.objects.exclude(state="succeeded").exists(), timeout=90, interval=0.5)
        wait_until(lambda: node.pumps[0].health == "running", timeout=10)
