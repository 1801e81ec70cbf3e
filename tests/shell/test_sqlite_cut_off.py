"""Cutting off a handler's SQLite connection from another thread: its transaction is rolled back, the write
lock is free at once, and the connection can neither write nor commit any more."""

from __future__ import annotations

import sqlite3
import threading
from types import SimpleNamespace

import pytest

from backwave_django.store import sqlite


@pytest.fixture
def path(tmp_path):
    made = tmp_path / "cut.sqlite3"
    with sqlite3.connect(made) as setup:
        setup.execute("CREATE TABLE t (x INTEGER)")
    setup.close()
    return made


def test_a_cut_off_connection_rolls_back_frees_the_lock_and_refuses_writes_and_commits(path):
    handler = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    handler.execute("BEGIN IMMEDIATE")
    handler.execute("INSERT INTO t VALUES (1)")  # prepared now, and cached: it must not escape the check
    other = threading.Thread(
        target=sqlite.cut_off, args=(SimpleNamespace(connection=handler, vendor="sqlite"),)
    )
    other.start()
    other.join()
    assert not handler.in_transaction
    pump = sqlite3.connect(path, timeout=0)  # the write lock is free: no wait
    pump.execute("INSERT INTO t VALUES (2)")
    pump.commit()
    for statement in ("INSERT INTO t VALUES (1)", "COMMIT", "BEGIN", "SELECT 1"):
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            handler.execute(statement)
    handler.commit()  # nothing to commit
    handler.rollback()
    assert pump.execute("SELECT x FROM t").fetchall() == [(2,)]
    handler.close()
    pump.close()


def test_sessions_of_other_databases_and_unopened_ones_are_left_alone():
    sqlite.cut_off(SimpleNamespace(connection=None, vendor="sqlite"))
    sqlite.cut_off(SimpleNamespace(connection=object(), vendor="postgresql"))
