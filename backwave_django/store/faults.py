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
#: the server shutting down or starting up, 26000 a prepared statement the server does not know (a pooler that
#: cannot keep them handed the statement another server connection: the next try prepares it again there).
TRANSIENT_SQLSTATES = (
    "08", "25006", "26000", "40001", "40P01", "53", "55P03", "57014", "57P01", "57P02", "57P03",
)  # fmt: skip
SQLITE_TRANSIENT = ("database is locked", "database table is locked", "disk i/o error", "unable to open")

#: MariaDB and MySQL error codes worth retrying (their drivers give a code, not a SQLSTATE class we can use):
#: 1205 lock wait timeout, 1213 deadlock, 1020 record changed since last read (a serialization failure);
#: the connection or the server gone: 2002, 2003, 2005, 2006, 2013, 2055, 1053 server shutdown, 1077 normal
#: shutdown, 1079 shutdown complete, 1152 aborted connection, 1158-1161 network read/write errors, 1927
#: connection killed, 4031 disconnected for inactivity; out of resources: 1021 disk full, 1037 and 1038 out
#: of memory, 1040 too many connections, 1041 out of resources, 1114 table full, 1135 no thread, 1203 and
#: 1226 user connection limits, 1637 too many transactions; a failover's read-only server: 1290, 1792,
#: 1836; a statement cut short: 1317 interrupted, 1969 and 3024 statement timeouts.
MYSQL_TRANSIENT_CODES = frozenset(
    {1020, 1205, 1213}
    | {2002, 2003, 2005, 2006, 2013, 2055, 1053, 1077, 1079, 1152, 1158, 1159, 1160, 1161, 1927, 4031}
    | {1021, 1037, 1038, 1040, 1041, 1114, 1135, 1203, 1226, 1637}
    | {1290, 1792, 1836}
    | {1317, 1969, 3024}
)


def sqlstate(exc: BaseException) -> str | None:
    for candidate in (exc, exc.__cause__, exc.__context__):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str):
            return code
    return None


def mysql_code(exc: BaseException) -> int | None:
    """The MariaDB/MySQL error code of ``exc`` (Django's wrapper copies the driver's arguments), or None."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        args = getattr(candidate, "args", ())
        driver = type(candidate).__module__.split(".")[0] in ("MySQLdb", "pymysql")
        if driver and args and isinstance(args[0], int):
            return args[0]
    return None


def is_transient(exc: BaseException) -> bool:
    """True for faults that a reconnect and a later retry can cure; everything else halts the Pump."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    code = sqlstate(exc)
    if code is not None:
        return code.startswith(TRANSIENT_SQLSTATES)
    number = mysql_code(exc)
    if number:  # 0 is the driver's own "no code" (mysqlclient's InterfaceError on a closed connection)
        return number in MYSQL_TRANSIENT_CODES
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    text = str(exc).lower()
    if any(marker in text for marker in SQLITE_TRANSIENT):
        return True
    # psycopg raises OperationalError without a SQLSTATE when the connection itself is gone.
    return isinstance(exc, InterfaceError) or "connection" in text or "server" in text
