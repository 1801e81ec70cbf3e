"""PgBouncer in transaction mode in front of the test database, in two configurations: PgBouncer 1.21 or later
with ``max_prepared_statements`` (backwave's prepared statements on), and any version without it
(``BACKWAVE['PREPARED_STATEMENTS'] = False``). The first is skipped where the installed PgBouncer is older.

A test that takes ``through_bouncer`` runs with the ``default`` alias pointed at the bouncer: the test's own
queries, the store's and every worker thread's go through it. ``direct`` is a second alias to the same
database that bypasses it (what ``LISTEN_DATABASE`` names)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection, connections

from ..aliases import database_alias
from . import bouncer as pgbouncer

CONFIGS = ["prepared", "unprepared"]
_running: dict[str, pgbouncer.Bouncer] = {}


def _skip_unless_possible(config: str) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PgBouncer sits in front of PostgreSQL (run with DATABASE_URL=postgres://...)")
    found = pgbouncer.version()
    if found is None:
        pytest.skip("no pgbouncer on PATH (apt-get install -y pgbouncer; scripts/test installs it as root)")
    if config == "prepared" and found < pgbouncer.PREPARED_SINCE:
        shown = ".".join(map(str, found))
        pytest.skip(f"PgBouncer {shown} has no max_prepared_statements (1.21 or later does)")


@pytest.fixture(scope="session", autouse=True)
def _stop_bouncers(django_db_setup: None) -> Iterator[None]:
    """After the last test, before the test database is dropped (a bouncer holds connections to it)."""
    yield
    for running in _running.values():
        running.stop()


@pytest.fixture(params=CONFIGS)
def bouncer(request: pytest.FixtureRequest) -> pgbouncer.Bouncer:
    config = request.param
    _skip_unless_possible(config)
    if config not in _running or _running[config].process.poll() is not None:
        upstream = connections["default"].settings_dict
        _running[config] = pgbouncer.start(
            upstream_host=upstream["HOST"] or "127.0.0.1",
            upstream_port=int(upstream["PORT"] or 5432),
            prepared=config == "prepared",
        )
    return _running[config]


@pytest.fixture
def through_bouncer(bouncer, transactional_db, settings) -> Iterator[pgbouncer.Bouncer]:
    """``default`` goes through the bouncer for the test; BACKWAVE prepares statements only where it can."""
    shared = connections["default"].settings_dict  # the one dict every thread's connection is built from
    saved = {key: shared[key] for key in ("HOST", "PORT")}
    connections["default"].close()
    shared.update(HOST="127.0.0.1", PORT=str(bouncer.port))
    settings.BACKWAVE = {"PREPARED_STATEMENTS": bouncer.prepared}
    try:
        yield bouncer
    finally:
        connections["default"].close()
        shared.update(saved)


@pytest.fixture
def direct(through_bouncer) -> Iterator[str]:
    """An alias that reaches the test database directly, beside ``default`` through the bouncer."""
    host, port = through_bouncer.upstream
    with database_alias("direct", HOST=host, PORT=str(port)) as alias:
        yield alias
