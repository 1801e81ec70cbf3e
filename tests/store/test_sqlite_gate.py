"""The SQLite write gate (store/sqlite_gate.py): one writer at a time per database file among a process's
threads, queued in Python, handed over in the order asked, never waited on longer than the connection's own
timeout, and given back however a transaction ends."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db.utils import ConnectionHandler, OperationalError

from backwave_django.store import sqlite, sqlite_gate
from backwave_django.store.sqlite_gate import Gate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def handler(tmp_path, django_db_blocker):
    """Connections of a fresh SQLite file, one per thread (as Django's own are), outside the test database."""
    name = str(tmp_path / "gate.sqlite3")
    databases = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
        "file": {"ENGINE": "django.db.backends.sqlite3", "NAME": name, "OPTIONS": {"timeout": 2}},
    }
    made = ConnectionHandler(databases)
    with django_db_blocker.unblock():
        with made["file"].cursor() as cursor:
            cursor.execute("CREATE TABLE t (x INTEGER)")
        yield made
        made.close_all()
    sqlite_gate._gates.pop(name, None)


def gated(handler):
    wrapper = handler["file"]
    sqlite_gate._guard(wrapper)
    return wrapper


def in_thread(handler, work):
    """Run ``work`` on a gated connection of a thread of its own, closed after; its future (the thread is not
    waited for here)."""

    def run():
        wrapper = gated(handler)
        try:
            return work(wrapper)
        finally:
            wrapper.close()

    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(run)
    finally:
        pool.shutdown(wait=False)


def test_the_gate_is_handed_over_in_the_order_it_was_asked_for():
    gate, order = Gate(), []
    assert gate.enter("first", timeout=1)

    def wait(name):
        assert gate.enter(name, timeout=5)
        order.append(name)
        gate.leave(name)

    threads = []
    for name in ("a", "b", "c", "d"):
        threads.append(threading.Thread(target=wait, args=(name,)))
        threads[-1].start()
        while len(gate._waiting) < len(threads):
            time.sleep(0.001)
    gate.leave("first")
    for thread in threads:
        thread.join()
    assert order == ["a", "b", "c", "d"]
    assert gate.holder is None and not gate._waiting


def test_a_wait_that_runs_out_goes_on_without_the_gate_and_leaves_the_queue():
    gate = Gate()
    assert gate.enter("holder", timeout=1)
    started = time.monotonic()
    assert gate.enter("late", timeout=0.05) is False
    assert time.monotonic() - started >= 0.05
    assert not gate._waiting
    gate.leave("late")  # not the holder: nothing happens
    assert gate.holder == "holder"
    gate.leave("holder")
    assert gate.holder is None


def test_a_transaction_holds_the_gate_from_begin_to_commit_and_a_lone_write_only_while_it_runs(handler):
    wrapper = gated(handler)
    gate = wrapper._backwave_gate
    with wrapper.cursor() as cursor:
        cursor.execute("INSERT INTO t VALUES (1)")  # autocommit: one statement
        assert gate.holder is None
        cursor.execute("BEGIN")
        assert gate.holder is wrapper
        cursor.execute("INSERT INTO t VALUES (2)")
    wrapper.commit()
    assert gate.holder is None
    with wrapper.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
    wrapper.rollback()
    assert gate.holder is None


def test_a_lone_write_that_returns_rows_ends_before_the_gate_is_given_back(handler):
    """SQLite commits an INSERT ... RETURNING only once its rows are read: given back before that, the gate
    let the next writer meet the write lock still taken (and sleep in SQLite's busy handler)."""
    wrapper = gated(handler)
    gate = wrapper._backwave_gate
    other = sqlite3.connect(wrapper.settings_dict["NAME"], timeout=0, isolation_level=None)
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (%s), (%s), (%s) RETURNING x", [1, 2, 3])
            assert gate.holder is None
            other.execute("BEGIN IMMEDIATE")  # the write lock is free: the insert has committed
            other.execute("ROLLBACK")
            assert cursor.fetchone() == (1,)
            assert cursor.fetchmany(1) == [(2,)]
            assert list(cursor) == [(3,)]
            assert cursor.fetchall() == []
            cursor.execute("SELECT x FROM t ORDER BY x DESC")  # the cursor's next statement reads anew
            assert cursor.fetchall() == [(3,), (2,), (1,)]
            cursor.execute("UPDATE t SET x = x + 10 WHERE x > %s RETURNING x", [1])
            assert sorted(cursor.fetchall()) == [(12,), (13,)]
            cursor.execute("DELETE FROM t WHERE x = %s", [12])  # no rows: nothing to read ahead
            assert cursor.rowcount == 1
            returned = cursor.execute("INSERT INTO t VALUES (%s) RETURNING x", [5])  # what execute gives back
            assert returned.fetchall() == [(5,)]
            cursor.execute("DELETE FROM t WHERE x = %s", [5])
        with wrapper.cursor() as cursor:  # in a transaction the gate stays until it ends: no reading ahead
            cursor.execute("BEGIN")
            cursor.execute("INSERT INTO t VALUES (%s) RETURNING x", [4])
            assert gate.holder is wrapper
            assert cursor.fetchall() == [(4,)]
        wrapper.commit()
        assert gate.holder is None
        assert other.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (4,), (13,)]
    finally:
        other.close()


def test_a_writer_waits_on_the_gate_and_goes_the_moment_it_is_free_while_readers_pass(handler):
    wrapper = gated(handler)
    gate = wrapper._backwave_gate
    with wrapper.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
        cursor.execute("INSERT INTO t VALUES (1)")

    def write(other):
        with other.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (2)")
        return time.monotonic()

    def read(other):
        with other.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM t")
            return cursor.fetchone()[0]

    assert in_thread(handler, read).result(timeout=1) == 0  # not blocked by the writer; sees none of its rows
    writer = in_thread(handler, write)
    while not gate._waiting:
        time.sleep(0.001)
    time.sleep(0.05)
    assert not writer.done()  # queued on the gate (its SQLite busy wait would have given up or gone on)
    committed = time.monotonic()
    wrapper.commit()
    assert writer.result(timeout=1) - committed < 0.5
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT x FROM t ORDER BY x")
        assert cursor.fetchall() == [(1,), (2,)]


def test_closing_a_connection_or_cutting_it_off_gives_the_gate_back(handler):
    wrapper = gated(handler)
    gate = wrapper._backwave_gate
    with wrapper.cursor() as cursor:
        cursor.execute("BEGIN")
    wrapper.close()
    assert gate.holder is None
    with wrapper.cursor() as cursor:  # a new connection on the same wrapper is still gated
        cursor.execute("BEGIN")
    assert gate.holder is wrapper
    in_thread(handler, lambda _: sqlite.cut_off(wrapper)).result(timeout=5)  # the Pump gives up on it
    assert gate.holder is None


def test_a_private_in_memory_database_is_not_gated(handler):
    wrapper = handler["default"]
    sqlite_gate._guard(wrapper)
    assert getattr(wrapper, "_backwave_gate", None) is None


def test_a_waiter_whose_time_runs_out_writes_anyway_and_sqlite_decides(handler):
    wrapper = gated(handler)
    with wrapper.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")

    def write(other):
        with other.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (1)")

    started = time.monotonic()
    with pytest.raises(OperationalError, match="locked"):
        in_thread(handler, write).result(timeout=10)
    assert time.monotonic() - started < 6  # the gate's 2 s, then SQLite's own 2 s: no deadlock
    wrapper.rollback()


SCRIPT = """
import sys, threading, time
import django
from django.conf import settings
settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1],
                                          "OPTIONS": {"timeout": 5}}})
django.setup()
from django.db import connection, transaction
from backwave_django.store import sqlite_gate
if sys.argv[2] == "gated":
    sqlite_gate.install()
with connection.cursor() as cursor:
    cursor.execute("CREATE TABLE t (x INTEGER)")
errors = []

def work(n):
    for i in range(20):
        try:
            with transaction.atomic():  # Django's default DEFERRED: it reads, then writes
                with connection.cursor() as cursor:
                    cursor.execute("SELECT count(*) FROM t")
                    time.sleep(0.001)
                    cursor.execute("INSERT INTO t VALUES (%s)", [n * 100 + i])
        except Exception as error:
            errors.append(str(error))
    connection.close()

threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with connection.cursor() as cursor:
    cursor.execute("SELECT count(*) FROM t")
    print(cursor.fetchone()[0], len(errors))
"""


@pytest.mark.parametrize(("mode", "lost"), [("plain", True), ("gated", False)])
def test_read_then_write_transactions_of_many_threads_collide_without_the_gate_and_not_with_it(
    tmp_path, mode, lost
):
    """Django's DEFERRED transactions that read before they write fail at once with "database is locked"
    when two meet (SQLite cannot make either wait); queued on the gate, none does."""
    script = textwrap.dedent(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / f"{mode}.sqlite3"), mode],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=True,
    )  # fmt: skip
    rows, errors = map(int, done.stdout.split())
    assert rows + errors == 160
    assert (errors > 0) is lost, done.stdout
