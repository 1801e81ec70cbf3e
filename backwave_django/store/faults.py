"""Which database errors are transient (degrade, retry later) and which halt a Pump.

A transient fault is one that a reconnect and a later retry can cure: the connection or the server went away,
a failover made the server read-only, the server ran out of a resource, a lock or statement timed out, a
serialization failure or deadlock picked this transaction. Everything else (a bug, a schema that does not
match, a constraint violated) halts the Pump that met it, so a person looks at it.
"""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

#: SQLSTATE classes and codes worth retrying: 08 connection exceptions, 25006 read-only transaction (a
#: failover's new standby), 40001 serialization failure, 40P01 deadlock, 53 insufficient resources (disk
#: full, out of memory, too many connections), 55P03 lock not available, 57014 statement timeout, 57P01-03
#: the server shutting down or starting up.
TRANSIENT_SQLSTATES = ("08", "25006", "40001", "40P01", "53", "55P03", "57014", "57P01", "57P02", "57P03")
SQLITE_TRANSIENT = ("database is locked", "database table is locked", "disk i/o error", "unable to open")


def sqlstate(exc: BaseException) -> str | None:
    for candidate in (exc, exc.__cause__, exc.__context__):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str):
            return code
    return None


def is_transient(exc: BaseException) -> bool:
    """True for faults that a reconnect and a later retry can cure; everything else halts the Pump."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    code = sqlstate(exc)
    if code is not None:
        return code.startswith(TRANSIENT_SQLSTATES)
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    text = str(exc).lower()
    if any(marker in text for marker in SQLITE_TRANSIENT):
        return True
    # psycopg raises OperationalError without a SQLSTATE when the connection itself is gone.
    return isinstance(exc, InterfaceError) or "connection" in text or "server" in text
