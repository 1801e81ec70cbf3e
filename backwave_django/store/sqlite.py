"""Cutting off the SQLite session of a handler the Pump has given up on.

SQLite has no server to end a session on. A handler that holds a transaction open (inside ``atomic()``,
asleep or stuck) holds the database's write lock, so no other write, the Pump's release of its job among
them, could commit before the handler ends; and when it does end, Django's commit on leaving ``atomic()``
goes straight to the connection, past every execute wrapper.

So the Pump acts on the handler's connection itself, from its own thread (Django opens SQLite connections
with ``check_same_thread=False``, and the SQLite library, as Python usually builds it, serializes calls on
one connection; a library that does not, ``sqlite3.threadsafety`` below 3, only gets the interrupt):

1. ``interrupt()`` stops a statement in progress;
2. an authorizer that refuses every statement but ``ROLLBACK`` is installed: from then on the connection
   can neither write nor commit (SQLite expires the statements it had prepared, so none escapes the check);
3. ``rollback()`` discards the open transaction, which gives the write lock back at once.

The handler's next statement fails with "not authorized", its commit finds no transaction to commit, and
its ``on_commit`` callbacks never run (the guard refuses the commit). The connection is closed when the
Attempt's thread is done with it. A statement the handler was running when the cut-off came is interrupted
first; the rollback then waits (at most the connection's busy timeout) for SQLite to hand the connection
over.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from . import sqlite_gate

__all__ = ["cut_off"]

logger = logging.getLogger("backwave.pump")

#: ``sqlite3.threadsafety`` of a library that serializes every call on a connection (the usual build).
SERIALIZED = 3


def _only_rollback(action: int, arg1: str | None, *_: object) -> int:
    """An authorizer: a connection cut off may roll back, and do nothing else."""
    if action == sqlite3.SQLITE_TRANSACTION and (arg1 or "").upper() == "ROLLBACK":
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def cut_off(session: Any) -> None:
    """Roll back the transaction a handler's SQLite connection holds and refuse its every later statement."""
    raw = getattr(session, "connection", None)
    if raw is None or getattr(session, "vendor", "") != "sqlite":
        return
    raw.interrupt()  # safe from any thread, whatever the build
    if sqlite3.threadsafety < SERIALIZED:
        logger.error(
            "this Python's SQLite library is not built serialized (sqlite3.threadsafety=%d): a handler's "
            "transaction cannot be rolled back from the Pump, and holds the write lock until it ends",
            sqlite3.threadsafety,
        )
        return
    raw.set_authorizer(_only_rollback)
    raw.rollback()
    sqlite_gate.release(session)  # its transaction is over: the next writer may go
