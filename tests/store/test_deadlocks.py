"""store.deadlocks: an operation the database rolled back to break a deadlock runs again, in its own
transaction only, and any other error reaches the caller at once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import OperationalError

from backwave_django.store import deadlocks


class _Deadlock(Exception):
    sqlstate = deadlocks.POSTGRES_DEADLOCK


class _Other(Exception):
    sqlstate = "23505"


def _store(in_atomic_block: bool) -> SimpleNamespace:
    return SimpleNamespace(connection=SimpleNamespace(in_atomic_block=in_atomic_block))


def _failing(times: int, cause: type[Exception]):
    calls = []

    def operation(store, value):
        calls.append(value)
        if len(calls) <= times:
            raise OperationalError("from the database") from cause()
        return value * 2

    return operation, calls


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch):
    monkeypatch.setattr(deadlocks.time, "sleep", lambda seconds: None)


def test_a_deadlock_victim_runs_again_until_it_passes():
    operation, calls = _failing(3, _Deadlock)
    assert deadlocks.restarted_on_deadlock(operation)(_store(False), 21) == 42
    assert calls == [21] * 4


def test_inside_the_callers_transaction_the_deadlock_reaches_the_caller():
    operation, calls = _failing(1, _Deadlock)
    with pytest.raises(OperationalError):
        deadlocks.restarted_on_deadlock(operation)(_store(True), 1)
    assert calls == [1]


def test_another_error_is_raised_at_once_and_the_runs_are_bounded():
    other, calls = _failing(1, _Other)
    with pytest.raises(OperationalError):
        deadlocks.restarted_on_deadlock(other)(_store(False), 1)
    assert calls == [1]
    endless, calls = _failing(10**6, _Deadlock)
    with pytest.raises(OperationalError):
        deadlocks.restarted_on_deadlock(endless)(_store(False), 1)
    assert len(calls) == deadlocks.DEADLOCK_RETRIES


def test_wrapping_twice_wraps_once():
    operation, _ = _failing(0, _Deadlock)
    once = deadlocks.restarted_on_deadlock(operation)
    assert deadlocks.restarted_on_deadlock(once) is once


def test_mariadbs_deadlock_code_is_one_too():
    class MySQLdbError(Exception):
        pass

    MySQLdbError.__module__ = "MySQLdb._exceptions"
    assert deadlocks.is_deadlock(_wrapped(MySQLdbError(deadlocks.MYSQL_DEADLOCK, "Deadlock found")))
    assert not deadlocks.is_deadlock(_wrapped(MySQLdbError(1062, "Duplicate entry")))


def _wrapped(cause: Exception) -> OperationalError:
    error = OperationalError(*cause.args)
    error.__cause__ = cause
    return error
