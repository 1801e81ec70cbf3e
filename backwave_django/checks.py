"""System checks: every wrong setting is an error with an id and a hint that says what to write."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError, connections

from . import conf

#: The oldest MariaDB that works: SELECT ... FOR UPDATE SKIP LOCKED came in 10.6 (RETURNING in 10.5).
MIN_MARIADB = (10, 6)
SUPPORTED_MARIADB = "MariaDB 10.6 or later"


@checks.register("backwave")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = [checks.Error(p.msg, hint=p.hint, id=p.id) for p in conf.problems()]
    if found:
        return found
    settings = conf.get()
    vendor = connections[settings.database].vendor
    if vendor not in ("postgresql", "sqlite", "mysql"):
        found.append(
            checks.Error(
                f"BACKWAVE['DATABASE'] ({settings.database!r}) is a {vendor} database.",
                hint=f"backwave-django supports PostgreSQL, SQLite and {SUPPORTED_MARIADB}; point "
                "BACKWAVE['DATABASE'] at one.",
                id="backwave.E014",
            )
        )
    found += _listen_database_problems(settings)
    from . import schedules
    from .registry import registry

    for check, msg, hint in schedules.problems(settings, registry):
        kind = checks.Warning if check.startswith("backwave.W") else checks.Error
        found.append(kind(msg, hint=hint, id=check))
    served = settings.served_queues()
    for registration in registry.all():
        if registration.queue not in served:
            found.append(
                checks.Warning(
                    f"Job {registration.wire_name!r} ({registration.handler_path}) goes to queue "
                    f"{registration.queue!r}, which no worker group serves.",
                    hint=f"Add {registration.queue!r} to the QUEUES of a group in BACKWAVE['GROUPS'].",
                    id="backwave.W001",
                )
            )
    return found


@checks.register("backwave")
def check_tasks_backend(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Django's own checks run each backend's ``check()`` (``backwave_django.tasks.checks``); before Django 6
    there is no Tasks framework to run them, so say why the setting does nothing."""
    import django

    from .apps import uses_tasks_backend

    if django.VERSION >= (6, 0) or not uses_tasks_backend():
        return []
    return [
        checks.Error(
            f"settings.TASKS names backwave_django.tasks.BackwaveBackend, but Django {django.get_version()} "
            "has no Tasks framework (django.tasks came in Django 6.0).",
            hint="Upgrade to Django 6, or enqueue with backwave's own @job functions (job.enqueue()).",
            id="backwave.E076",
        )
    ]


def _listen_database_problems(settings: conf.Settings) -> list[checks.CheckMessage]:
    """LISTEN_DATABASE is a second route to the jobs' PostgreSQL database, for LISTEN only."""
    alias = settings.listen_database
    if alias is None:
        return []
    vendors = {name: connections[name].vendor for name in (settings.database, alias)}
    if set(vendors.values()) == {"postgresql"}:
        return []
    return [
        checks.Error(
            f"BACKWAVE['LISTEN_DATABASE'] is {alias!r} (a {vendors[alias]} database) for "
            f"BACKWAVE['DATABASE'] {settings.database!r} (a {vendors[settings.database]} database): wake-up "
            "hints are PostgreSQL's LISTEN/NOTIFY, so both must be PostgreSQL.",
            hint="Remove LISTEN_DATABASE (other databases are polled), or point it at an alias that connects "
            "directly (not through a transaction pooler) to the PostgreSQL database of BACKWAVE['DATABASE'].",
            id="backwave.E064",
        )
    ]


@checks.register("backwave", checks.Tags.database)
def check_autovacuum(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """With ``--database`` (and at ``migrate``): warn when PostgreSQL runs without autovacuum."""
    if not conf.problems() and databases and conf.get().database in databases:
        connection = connections[conf.get().database]
        if connection.vendor == "postgresql":
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SHOW autovacuum")
                    enabled = cursor.fetchone()[0] == "on"
            except DatabaseError:
                return []
            if not enabled:
                return [
                    checks.Warning(
                        "autovacuum is off on this PostgreSQL server: finished jobs leave dead rows that "
                        "slow every claim down until a VACUUM removes them.",
                        hint="Turn autovacuum on (the default), or VACUUM the backwave_django_* tables "
                        "regularly (for example from cron).",
                        id="backwave.W002",
                    )
                ]
    return []


#: What a project on SQLite should put in its database's OPTIONS (docs/howto/deploy.md says why, measured).
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}


@checks.register("backwave")
def check_sqlite_options(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """On SQLite: warn when the database's OPTIONS leave out WAL or IMMEDIATE transactions. Read from the
    settings, without opening the file."""
    if conf.problems():
        return []
    alias = conf.get().database
    return sqlite_problems(alias, connections.settings.get(alias, {}))


def sqlite_problems(alias: str, database: dict[str, Any]) -> list[checks.CheckMessage]:
    """The W004 warning for one entry of DATABASES, when it is SQLite without the recommended OPTIONS."""
    if database.get("ENGINE") != "django.db.backends.sqlite3":
        return []
    options = database.get("OPTIONS") or {}
    init = "".join(str(options.get("init_command", "")).lower().split())
    missing = []
    if "journal_mode=wal" not in init:
        missing.append("WAL (readers beside the writer, and a commit without a second file rewrite)")
    if str(options.get("transaction_mode", "")).upper() != "IMMEDIATE":
        missing.append("IMMEDIATE transactions (a writer waits for the lock at BEGIN instead of failing)")
    if not missing:
        return []
    return [
        checks.Warning(
            f"DATABASES[{alias!r}] is SQLite without {' or '.join(missing)}: with worker processes and "
            "your own requests writing to one file, jobs run slowly and 'database is locked' errors appear.",
            hint=f'Add to DATABASES[{alias!r}]: "OPTIONS": {SQLITE_OPTIONS!r}, and "CONN_MAX_AGE": 60 '
            "(synchronous=NORMAL in WAL mode can lose the last commits on power loss, never corrupt the "
            "file; leave it out to keep FULL). See docs/howto/deploy.md.",
            id="backwave.W004",
        )
    ]


def worker_connection_problems(alias: str, database: dict[str, Any]) -> list[checks.CheckMessage]:
    """The W005 warning, which ``backwave_pump`` prints when it starts (it is not a registered check: a web
    process may well want ``CONN_MAX_AGE = 0``): connections to the jobs' database are closed when each
    Attempt ends, so every job that uses the database opens one of its own."""
    options = database.get("OPTIONS")
    pooled = isinstance(options, dict) and options.get("pool")
    if database.get("CONN_MAX_AGE", 0) != 0 or pooled:
        return []
    return [
        checks.Warning(
            f"DATABASES[{alias!r}] has CONN_MAX_AGE 0: every job that uses the database opens a connection "
            "of its own, and the per-Attempt scope closes it when the Attempt ends (on PostgreSQL, jobs that "
            "write one row drained about 7 times slower than with CONN_MAX_AGE 60).",
            hint='Set "CONN_MAX_AGE": 60 (each worker thread then keeps its connection between Attempts, and '
            "closes it once it is that old or broken), or on PostgreSQL with Django 5.1+ "
            '"OPTIONS": {"pool": True} (needs psycopg[pool]). Silence it with SILENCED_SYSTEM_CHECKS. See '
            "docs/howto/deploy.md.",
            id="backwave.W005",
        )
    ]


@checks.register("backwave")
def check_database_server(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """On Django's mysql backend: read what the server is (MariaDB or MySQL, its version) and how the
    connection is set up, and refuse what backwave cannot run on. Other databases need no connection here."""
    if conf.problems():
        return []
    connection: Any = connections[conf.get().database]  # a mysql DatabaseWrapper, with its server facts
    if connection.vendor != "mysql":
        return []
    from .store.mysql import largest_storable_payload, max_allowed_packet

    alias = conf.get().database
    try:
        server = (connection.mysql_is_mariadb, connection.mysql_version)
        session = ("", "")
        if server[0]:
            with connection.cursor() as cursor:
                cursor.execute("SELECT @@SESSION.tx_isolation, @@SESSION.character_set_client")
                session = cursor.fetchone()
        packet = max_allowed_packet(connection)
    except DatabaseError:
        return []  # unreachable now: the worker will say so loudly when it starts
    found = mysql_problems(alias, server, *session)
    if conf.get().max_payload_bytes > largest_storable_payload(packet):
        found.append(
            checks.Error(
                f"BACKWAVE['MAX_PAYLOAD_BYTES'] is {conf.get().max_payload_bytes}, but the server of "
                f"BACKWAVE['DATABASE'] ({alias!r}) takes statements of at most {packet} bytes "
                "(max_allowed_packet): a payload that large, escaped, would not fit in one.",
                hint=f"Lower MAX_PAYLOAD_BYTES to at most {largest_storable_payload(packet)}, or raise the "
                "server's max_allowed_packet to twice MAX_PAYLOAD_BYTES plus 65 KiB.",
                id="backwave.E049",
            )
        )
    return found


def mysql_problems(
    alias: str, server: tuple[bool, tuple[int, ...]], isolation: str, charset: str
) -> list[checks.CheckMessage]:
    """What backwave refuses on a server of Django's mysql backend: ``server`` says whether it is MariaDB
    and its version; ``isolation`` and ``charset`` are the session's (read on MariaDB only)."""
    mariadb, version = server
    shown = ".".join(map(str, version))
    if not mariadb:
        return [
            checks.Error(
                f"BACKWAVE['DATABASE'] ({alias!r}) is MySQL {shown}, which backwave-django does not support "
                "yet: its conformance suite runs on MariaDB only, and on MySQL Django's bulk insert cannot "
                "return the new jobs' ids.",
                hint=f"Use {SUPPORTED_MARIADB}, or PostgreSQL.",
                id="backwave.E045",
            )
        ]
    found: list[checks.CheckMessage] = []
    if version < MIN_MARIADB:
        found.append(
            checks.Error(
                f"BACKWAVE['DATABASE'] ({alias!r}) is MariaDB {shown}, which has no SELECT ... FOR UPDATE "
                "SKIP LOCKED: workers could not claim jobs without waiting for each other.",
                hint=f"Upgrade to {SUPPORTED_MARIADB}.",
                id="backwave.E046",
            )
        )
    if isolation.replace("-", " ").upper() != "READ COMMITTED":
        found.append(
            checks.Error(
                f"The connections of BACKWAVE['DATABASE'] ({alias!r}) run at isolation level {isolation}: "
                "a claim would count a limited queue's leases in a snapshot older than its lock, and exceed "
                "the limit.",
                hint="Use READ COMMITTED, Django's default on MariaDB: remove 'isolation_level' from the "
                "database's OPTIONS, or set it to 'read committed'.",
                id="backwave.E047",
            )
        )
    if charset != "utf8mb4":
        found.append(
            checks.Error(
                f"The connections of BACKWAVE['DATABASE'] ({alias!r}) use the character set {charset}: text "
                "with characters outside the Basic Multilingual Plane (emoji, say) cannot be stored.",
                hint="Use utf8mb4, Django's default on MariaDB: remove 'charset' from the database's "
                "OPTIONS, or set it to 'utf8mb4'.",
                id="backwave.E048",
            )
        )
    return found
