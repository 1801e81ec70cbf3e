"""Which PostgreSQL errors degrade a Pump (transient) and which halt it, tried on errors a real server raised
wherever the server can be made to raise them, and on psycopg's own error classes where it cannot (a full
disk, no memory)."""

from __future__ import annotations

import psycopg
import psycopg.errors
import pytest
from django.contrib.auth.models import Group
from django.db import DatabaseError, IntegrityError, OperationalError, connection, transaction

from backwave_django.store import faults, get_store

pytestmark = pytest.mark.usefixtures("postgres")


def raised_by_the_server(sql: str, *, read_only: bool = False) -> DatabaseError:
    """The error Django raises (the driver's error as its cause) when the server refuses ``sql``."""
    with pytest.raises(DatabaseError) as raised, transaction.atomic(), connection.cursor() as cursor:
        if read_only:
            cursor.execute("SET TRANSACTION READ ONLY")
        cursor.execute(sql)
    return raised.value


def other_params() -> dict[str, object]:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return params


def code(error: BaseException) -> str | None:
    return faults.sqlstate(error)


def test_a_write_in_a_read_only_transaction_25006_as_after_a_failover_is_transient():
    error = raised_by_the_server("INSERT INTO auth_group (name) VALUES ('read-only')", read_only=True)
    assert code(error) == "25006"
    assert isinstance(error.__cause__, psycopg.errors.ReadOnlySqlTransaction)
    assert faults.is_transient(error) and get_store().is_transient_fault(error)


def test_a_prepared_statement_the_server_does_not_know_26000_is_transient():
    """Behind a pooler that cannot keep prepared statements, a Pump's prepared report can land on a server
    connection that never saw it: the Pump degrades and tries again (and the pooler hint names the setting)
    instead of halting."""
    error = raised_by_the_server("EXECUTE backwave_never_prepared")
    assert code(error) == "26000"
    assert faults.is_transient(error) and get_store().is_transient_fault(error)


@pytest.mark.parametrize("state", ["53100", "53200", "53300", "53400"])
def test_insufficient_resources_class_53_is_transient(state):
    """Disk full, out of memory, too many connections, a configuration limit: made from psycopg's classes (a
    test server cannot be filled up), as the driver raises them and as Django wraps them."""
    driver_error = psycopg.errors.lookup(state)("out of something")
    assert driver_error.sqlstate == state
    wrapped = DatabaseError("out of something")
    wrapped.__cause__ = driver_error
    assert faults.is_transient(driver_error) and faults.is_transient(wrapped)


def test_a_connection_refused_for_too_many_connections_by_a_real_server_is_transient():
    """A role over its connection limit: the server says 53300 before the session exists (libpq gives no
    SQLSTATE then, only the message). Roles belong to the whole server: this one is named after the test
    database, so that runs on other databases never share it."""
    role = f"backwave_no_connections_{connection.settings_dict['NAME']}"
    with psycopg.connect(**other_params(), autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
        session = connection.copy()
        session.settings_dict = {**session.settings_dict, "USER": role}
        try:
            with pytest.raises(OperationalError, match="too many connections") as raised:
                session.ensure_connection()  # as a Pump's store connects: through Django
        finally:
            session.close()
            admin.execute(f'DROP ROLE "{role}"')
    assert faults.is_transient(raised.value) and get_store().is_transient_fault(raised.value)


@pytest.mark.parametrize("state", ["08000", "08003", "08006", "08001", "08004", "08P01"])
def test_connection_exceptions_class_08_are_transient(state):
    driver_error = psycopg.errors.lookup(state)("connection trouble")
    wrapped = DatabaseError("connection trouble")
    wrapped.__cause__ = driver_error
    assert faults.is_transient(driver_error) and faults.is_transient(wrapped)


def test_a_session_the_server_ended_is_transient():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [pid] = cursor.fetchone()
    with psycopg.connect(**other_params(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(DatabaseError) as raised, connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    connection.close()
    assert faults.is_transient(raised.value)


def test_content_and_schema_errors_raised_by_a_real_server_are_not_transient():
    untranslatable = raised_by_the_server("""SELECT '{"sku": "\\u0000"}'::jsonb""")
    Group.objects.create(name="taken")
    duplicate = raised_by_the_server("INSERT INTO auth_group (name) VALUES ('taken')")
    missing = raised_by_the_server("SELECT * FROM backwave_no_such_table")
    assert [code(e) for e in (untranslatable, duplicate, missing)] == ["22P05", "23505", "42P01"]
    assert isinstance(duplicate, IntegrityError)
    assert not any(faults.is_transient(e) for e in (untranslatable, duplicate, missing))
