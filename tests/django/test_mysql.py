"""MariaDB: which of its errors are transient, its named locks' names, what the system checks refuse, and
(on a MariaDB run) the real server's answers."""

from __future__ import annotations

import pytest
from django.db import DataError, IntegrityError, OperationalError, ProgrammingError, connection

from backwave_django.checks import check_database_server, mysql_problems
from backwave_django.store import faults
from backwave_django.store.contract import OutcomeDetail
from backwave_django.store.mysql import LOCK_SLOTS, MySQLStore, QueueLockTimeout, lock_name

MySQLdb = pytest.importorskip("MySQLdb")


def driver_error(wrapper: type[Exception], driver: type[Exception], code: int, text: str) -> Exception:
    """What Django raises for a driver error: its own class, the driver's arguments, the driver's cause."""
    error = wrapper(code, text)
    error.__cause__ = driver(code, text)
    return error


TRANSIENT = {
    "deadlock": (1213, "Deadlock found when trying to get lock; try restarting transaction"),
    "lock wait timeout": (1205, "Lock wait timeout exceeded; try restarting transaction"),
    "server gone away": (2006, "Server has gone away"),
    "connection lost": (2013, "Lost connection to server during query"),
    "killed": (1927, "Connection was killed"),
    "read-only server": (1290, "The MariaDB server is running with the --read-only option"),
    "read-only transaction": (1792, "Cannot execute statement in a READ ONLY transaction"),
    "too many connections": (1040, "Too many connections"),
    "statement timeout": (1969, "Query execution was interrupted (max_statement_time exceeded)"),
}
REFUSED = {
    "data too long": (DataError, MySQLdb.DataError, 1406, "Data too long for column 'queue' at row 1"),
    "bad string": (OperationalError, MySQLdb.OperationalError, 1366, "Incorrect string value: '\\xF0\\x9F'"),
    "duplicate key": (IntegrityError, MySQLdb.IntegrityError, 1062, "Duplicate entry 'a' for key 'PRIMARY'"),
    "no such table": (ProgrammingError, MySQLdb.ProgrammingError, 1146, "Table 'x' doesn't exist"),
    "unknown thread": (OperationalError, MySQLdb.OperationalError, 1094, "Unknown thread id: 7"),
}


@pytest.mark.parametrize(("code", "text"), TRANSIENT.values(), ids=TRANSIENT.keys())
def test_mariadb_errors_a_reconnect_and_a_retry_can_cure_are_transient(code, text):
    error = driver_error(OperationalError, MySQLdb.OperationalError, code, text)
    assert faults.is_transient(error) is True
    assert MySQLStore().is_transient_fault(error) is True


@pytest.mark.parametrize(("wrapper", "driver", "code", "text"), REFUSED.values(), ids=REFUSED.keys())
def test_mariadb_refusals_and_bugs_are_never_transient_whatever_their_text_says(wrapper, driver, code, text):
    error = driver_error(wrapper, driver, code, text + " (server connection)")
    assert faults.is_transient(error) is False


def test_a_queue_lock_not_granted_in_time_is_transient():
    assert MySQLStore().is_transient_fault(QueueLockTimeout("waited 30 s")) is True


def test_named_lock_names_fit_mariadb_and_differ_by_database_queue_and_slot():
    names = {lock_name(db, queue, slot) for db in ("a", "b") for queue in ("q", "Q") for slot in range(8)}
    assert len(names) == 2 * 2 * 8
    assert max(len(name) for name in names) <= 64
    assert len(lock_name("d" * 64, "q" * 128, LOCK_SLOTS - 1)) <= 64


def ids(messages):
    return [m.id for m in messages]


def test_mariadb_10_6_and_later_with_django_defaults_is_accepted():
    for version in ((10, 6, 0), (10, 11, 19), (11, 4, 2)):
        assert mysql_problems("default", (True, version), "READ-COMMITTED", "utf8mb4") == []


def test_what_backwave_cannot_run_on_is_refused_with_an_id_and_a_hint_that_names_the_fix():
    [old] = mysql_problems("default", (True, (10, 5, 27)), "READ-COMMITTED", "utf8mb4")
    assert (old.id, old.hint) == ("backwave.E046", "Upgrade to MariaDB 10.6 or later.")
    assert "MariaDB 10.5.27" in old.msg
    [mysql] = mysql_problems("default", (False, (8, 4, 3)), "", "")
    assert mysql.id == "backwave.E045" and "MySQL 8.4.3" in mysql.msg and "MariaDB 10.6" in mysql.hint
    assert ids(mysql_problems("default", (True, (10, 11)), "REPEATABLE-READ", "utf8mb4")) == ["backwave.E047"]
    assert ids(mysql_problems("default", (True, (10, 11)), "SERIALIZABLE", "utf8mb3")) == [
        "backwave.E047",
        "backwave.E048",
    ]


@pytest.fixture
def mariadb(db):
    if connection.vendor != "mysql":
        pytest.skip("needs MariaDB (run with DATABASE_URL=mysql://...)")


def test_the_server_of_this_run_passes_the_checks(mariadb):
    assert check_database_server() == []


@pytest.mark.django_db(transaction=True)  # no test transaction around it: the kill would end that too
def test_a_killed_store_connection_is_a_transient_fault_and_a_reconnect_cures_it(mariadb):
    store = MySQLStore()
    store.list_queues()
    victim = connection.connection.thread_id()
    other = MySQLdb.connect(**connection.get_connection_params())
    try:
        other.cursor().execute(f"KILL CONNECTION {int(victim)}")
    finally:
        other.close()
    with pytest.raises(OperationalError) as raised:
        store.list_queues()
    assert store.is_transient_fault(raised.value)
    store.reconnect()
    assert store.list_queues() == []


@pytest.mark.django_db(transaction=True)
def test_enqueue_and_outcome_batches_larger_than_a_statement_may_be_are_cut_to_fit(mariadb):
    """64 KiB payloads by the thousand: 64 MiB of text, four times max_allowed_packet, in one enqueue."""
    from backwave_django.core.records import OutcomeKind, OutcomeReport
    from backwave_django.core.retry import RetryPolicy
    from backwave_django.store.contract import NewJob

    from ..conftest import LEASE, T0

    store, text = MySQLStore(), "'" * 65_000  # every character escaped: twice its size on the wire
    jobs = [
        NewJob(wire_name="tests.noop", payload=f'"{text}"', queue="default", due_at=T0, max_attempts=3)
        for _ in range(1000)
    ]
    created = store.enqueue(jobs, now=T0, max_payload_bytes=65_536)
    assert len({c.id for c in created}) == 1000
    claimed = store.claim(
        worker_id="h:1:g:a", queues=["default"], max_jobs=1000, lease_duration=LEASE, now=T0
    )
    reports = [
        OutcomeReport(job_id=c.id, attempt=1, kind=OutcomeKind.FAILED, max_attempts=3, message=text[:2000])
        for c in claimed
    ]
    details = {c.id: OutcomeDetail(traceback=text[:8000]) for c in claimed}
    result = store.report(worker_id="h:1:g:a", reports=reports, retry=RetryPolicy(), now=T0, details=details)
    assert len(result.applied) == 1000
