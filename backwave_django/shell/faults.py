"""Which database errors are transient (retry on the next tick) and which halt a Pump."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

#: SQLSTATE classes and codes worth retrying: connection failures, serialization failures, deadlocks,
#: lock and statement timeouts, a server shutting down or starting up.
TRANSIENT_SQLSTATES = ("08", "40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "53300")
SQLITE_TRANSIENT = ("database is locked", "database table is locked", "disk i/o error", "unable to open")


def _sqlstate(exc: BaseException) -> str | None:
    for candidate in (exc, exc.__cause__, exc.__context__):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str):
            return code
    return None


def is_transient(exc: BaseException) -> bool:
    """True for faults that a reconnect and a later retry can cure; everything else halts the Pump."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    code = _sqlstate(exc)
    if code is not None:
        return code.startswith(TRANSIENT_SQLSTATES)
    text = str(exc).lower()
    if any(marker in text for marker in SQLITE_TRANSIENT):
        return True
    # psycopg raises OperationalError without a SQLSTATE when the connection itself is gone.
    return isinstance(exc, InterfaceError) or "connection" in text or "server" in text
