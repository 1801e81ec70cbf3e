"""One writer at a time per SQLite file in a worker process, queued in Python rather than in SQLite's busy
loop.

SQLite lets one connection write at a time. A connection that finds the write lock taken waits in SQLite's
busy handler, which sleeps (1 ms, then 2, 5, 10 ... up to 100 ms a time) and looks again, so under the
contention of a Pump's handler threads a freed lock is mostly picked up late, and a write that waits past
the ``timeout`` fails with "database is locked". Measured on one file with jobs that each write a row, 20
handler threads spent most of their time asleep there.

So in a worker process each SQLite connection takes a gate, one Python lock per database file, before it
writes: before ``BEGIN`` (any mode) or a writing statement outside a transaction, and gives it back when the
transaction ends (commit, rollback, close, or the end of that one statement). Threads waiting on the gate are
woken the moment it is free, in the order the operating system gives. Reads outside a transaction pass
freely (WAL lets them run beside the writer).

A lone write that returns rows (Django inserts with ``RETURNING``) keeps SQLite's write lock until its rows
are read: SQLite commits the statement's implicit transaction only when it runs to its end. So the gate reads
those rows before it is given back, and the cursor hands them out from there (:class:`_Drained`). Given back
at once, the next writer found the lock still taken and slept in SQLite's busy handler, 1 ms at least: one
job's insert in ten, measured with jobs that each write a row (the drain went 1,554 → 1,884 jobs/s).

A connection waits on the gate at most its own ``timeout`` (Django's default 5 s, ``OPTIONS['timeout']``);
then it goes on without it, and SQLite decides as it always did, so the gate never turns a slow writer into a
deadlock. Other processes on the file still meet in SQLite's busy handler, but each brings at most one
writer.

Only worker processes install it (``backwave_pump`` and the benchmark's workers, when they start): what a web
process does with its connections is left alone.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connections
from django.db.backends.signals import connection_created

#: The first word of a statement that may write, outside a transaction (or begin one).
WRITES = frozenset({"BEGIN", "INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "WITH"})
#: The first word of a statement that, returning rows, has written: its rows are read before the gate goes.
RETURNING_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})
DEFAULT_TIMEOUT = 5.0  # seconds: Python's sqlite3 default, which Django keeps

_gates: dict[str, Gate] = {}
_gates_lock = threading.Lock()
_installed = False


class Gate:
    """The write gate of one database file in this process, handed over in the order it was asked for (a
    plain lock lets a thread that keeps asking, a handler thread after its next job, pass one that waits, the
    Pump with a batch of outcomes). Handing it over in turn also lets the Pump's batches fill: given the
    gate first, a Pump claimed and reported after every job or two, and the drain was slower."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: deque[tuple[Any, threading.Lock]] = deque()
        self.holder: Any = None  # the Django connection that holds it

    def enter(self, wrapper: Any, timeout: float) -> bool:
        """Wait for the gate (at most ``timeout`` seconds); whether ``wrapper`` holds it now."""
        with self._lock:
            if self.holder is None and not self._waiting:
                self.holder = wrapper
                return True
            turn = threading.Lock()
            turn.acquire()
            waiter = (wrapper, turn)
            self._waiting.append(waiter)
        if turn.acquire(timeout=timeout):
            return True  # handed over: the one that left made ``wrapper`` the holder
        with self._lock:
            if self.holder is wrapper:  # handed over just as the wait ran out
                return True
            self._waiting.remove(waiter)
            return False

    def leave(self, wrapper: Any) -> None:
        """Give the gate back, if ``wrapper`` holds it, to whoever asked first."""
        with self._lock:
            if self.holder is not wrapper:
                return
            if not self._waiting:
                self.holder = None
                return
            self.holder, turn = self._waiting.popleft()
        turn.release()


def install() -> None:
    """From now on, gate every SQLite connection of this process: those open in this thread now, and every
    one opened later, in any thread. Idempotent."""
    global _installed
    with _gates_lock:
        if _installed:
            return
        _installed = True
    connection_created.connect(_on_connection_created, dispatch_uid="backwave_sqlite_gate")
    for wrapper in connections.all(initialized_only=True):
        _guard(wrapper)


def release(wrapper: Any) -> None:
    """Give back the gate ``wrapper`` may hold: its transaction was rolled back behind its back (the Pump cut
    its handler off, ``store/sqlite.py``)."""
    gate = getattr(wrapper, "_backwave_gate", None)
    if gate is not None:
        gate.leave(wrapper)


def _on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    _guard(connection)


def _guard(wrapper: Any) -> None:
    """Put the gate of its file on one SQLite connection wrapper (once: it outlives its connections)."""
    if wrapper.vendor != "sqlite" or getattr(wrapper, "_backwave_gate", None) is not None:
        return
    if wrapper.is_in_memory_db():
        return  # a private database: nobody else writes to it
    name = str(wrapper.settings_dict["NAME"])
    with _gates_lock:
        gate = _gates.setdefault(name, Gate())
    timeout = float(wrapper.settings_dict.get("OPTIONS", {}).get("timeout", DEFAULT_TIMEOUT))
    wrapper._backwave_gate = gate
    wrapper.execute_wrappers.append(_gated(gate, wrapper, timeout))
    for ending in ("_commit", "_rollback", "_close"):
        setattr(wrapper, ending, _leaving(gate, wrapper, getattr(wrapper, ending)))


def _gated(gate: Gate, wrapper: Any, timeout: float) -> Callable[..., Any]:
    def execute(run: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if gate.holder is wrapper or _in_transaction(wrapper.connection) or not _may_write(sql):
            return run(sql, params, many, context)
        held = gate.enter(wrapper, timeout)
        try:
            result = run(sql, params, many, context)
            if held and not many and not _in_transaction(wrapper.connection):
                drained = _drain_returned_rows(wrapper, context["cursor"], sql)
                if drained is not None and result is drained._inner:  # sqlite3's execute returns its cursor
                    return drained
            return result
        finally:
            if held and not _in_transaction(wrapper.connection):  # one statement alone, or a failed BEGIN
                gate.leave(wrapper)

    return execute


def _drain_returned_rows(wrapper: Any, owner: Any, sql: str) -> _Drained | None:
    """Read the rows of a lone write that returns some (``RETURNING``), which ends its implicit transaction,
    and let ``owner`` (Django's cursor wrapper) hand them out; what stands in for its cursor now, if any."""
    inner = owner.cursor
    if inner.description is None or _first_word(sql) not in RETURNING_WRITES:
        return None
    with wrapper.wrap_database_errors:
        rows = inner.fetchall()
    drained = owner.cursor = _Drained(owner, inner, rows)
    return drained


class _Drained:
    """Stands in for a cursor whose rows were read ahead: hands them out, passes everything else through, and
    steps aside when the cursor runs its next statement."""

    def __init__(self, owner: Any, inner: Any, rows: list[Any]) -> None:
        self._owner, self._inner, self._rows = owner, inner, iter(rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __iter__(self) -> Iterator[Any]:
        return self._rows

    def fetchone(self) -> Any:
        return next(self._rows, None)

    def fetchmany(self, size: int | None = None) -> list[Any]:
        return list(itertools.islice(self._rows, size or self._inner.arraysize))

    def fetchall(self) -> list[Any]:
        return list(self._rows)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self._step_aside().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        return self._step_aside().executemany(*args, **kwargs)

    def executescript(self, *args: Any, **kwargs: Any) -> Any:
        return self._step_aside().executescript(*args, **kwargs)

    def _step_aside(self) -> Any:
        if self._owner.cursor is self:
            self._owner.cursor = self._inner
        return self._inner


def _leaving(gate: Gate, wrapper: Any, method: Callable[[], Any]) -> Callable[[], Any]:
    def end() -> Any:
        try:
            return method()
        finally:
            if not _in_transaction(wrapper.connection):
                gate.leave(wrapper)

    return end


def _in_transaction(raw: Any) -> bool:
    try:
        return raw is not None and bool(raw.in_transaction)
    except Exception:  # a closed connection: it holds no transaction
        return False


def _first_word(sql: str) -> str:
    first = sql.lstrip()[:8].split(None, 1)
    return first[0].upper() if first else ""


def _may_write(sql: str) -> bool:
    return _first_word(sql) in WRITES
