"""Shared fixtures. The suite runs once per database: SQLite by default, PostgreSQL or MariaDB by
DATABASE_URL.

The conformance suite (``tests/contract``) runs each test that takes ``store`` once per store this run
certifies: the in-memory store always (without a database), and the stores of the database: on PostgreSQL the
native PostgresStore (``[postgres]``) and the portable ORM store (``[portable]``), on MariaDB the MySQLStore
(``[mysql]``: the portable store's code with MariaDB's named locks, KILL and deadlock restarts; a bare
portable store is never used there, and without the restarts InnoDB's deadlocks between concurrent workers
would reach its callers), on SQLite the portable store (``[sqlite]``). Tests that take ``db_store`` need what
only a database has (real transactions, real concurrency, a database that refuses a row) and run on the
database's stores only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db import connection

from backwave_django import signals
from backwave_django.store import JobStore, get_store
from backwave_django.store.django import DjangoStore
from backwave_django.store.memory import MemoryStore
from backwave_django.store.mysql import MySQLStore
from backwave_django.store.postgres import PostgresStore
from backwave_django.store.sqlite_store import SQLiteStore

from . import jobs  # noqa: F401  (registers the tests.* jobs)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(minutes=1)


def database_store_kinds() -> list[str]:
    """The stores the conformance suite certifies on this run's database."""
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" in engine:
        return ["postgres", "portable"]
    return ["mysql"] if "mysql" in engine else ["sqlite", "portable"]


def store_kinds() -> list[str]:
    return ["memory", *database_store_kinds()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``store``: every store of this run, named in the test id; ``db_store``: the database's stores only."""
    wants_any, wants_db = "store" in metafunc.fixturenames, "db_store" in metafunc.fixturenames
    if wants_any and wants_db:
        raise pytest.UsageError(f"{metafunc.function.__name__} takes both store and db_store: pick one")
    if wants_any or wants_db:
        # A database store's test id gets the django_db mark, so that pytest-django sets the database up,
        # unless the test (or its module) has its own, such as transaction=True.
        own = next(metafunc.definition.iter_markers("django_db"), None)
        db_mark = () if own is not None else pytest.mark.django_db
        kinds = store_kinds() if wants_any else database_store_kinds()
        metafunc.parametrize(
            "store_kind", [pytest.param(k, marks=() if k == "memory" else db_mark, id=k) for k in kinds]
        )


def make_store(kind: str) -> JobStore:
    """A store of ``kind``; a database one over the ``default`` alias (the caller sets the database up)."""
    match kind:
        case "memory":
            return MemoryStore(announce=signals.Announcer(MemoryStore))
        case "portable":
            return DjangoStore("default")
        case "postgres" | "mysql" | "sqlite":
            made = get_store("default")
            expected = {"postgres": PostgresStore, "mysql": MySQLStore, "sqlite": SQLiteStore}[kind]
            assert type(made) is expected, f"get_store() gave {type(made).__name__} for {kind}"
            return made
    raise ValueError(f"no store kind {kind!r}")


@pytest.fixture
def store(store_kind: str) -> JobStore:
    """One store per test id. The memory store's ids have no database: a test there must not need one."""
    return make_store(store_kind)


@pytest.fixture
def db_store(store_kind: str, db: None) -> DjangoStore:
    made = make_store(store_kind)
    assert isinstance(made, DjangoStore)
    return made


@pytest.fixture
def every_store(db: None) -> dict[str, JobStore]:
    """One of each store this run certifies, by kind, for tests that compare them with each other (the
    database's stores share its tables: each test sets up its own jobs in each)."""
    return {kind: make_store(kind) for kind in store_kinds()}


@pytest.fixture
def t0() -> datetime:
    return T0


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def has_row_locks() -> bool:
    """PostgreSQL and MariaDB: real row locks and concurrent writers (SQLite serializes every writer)."""
    return connection.vendor in ("postgresql", "mysql")


@pytest.fixture
def postgres(db: None) -> None:
    """Skip unless the suite runs on PostgreSQL."""
    if not on_postgres():
        pytest.skip("needs PostgreSQL (run with DATABASE_URL=postgres://...)")


@pytest.fixture
def row_locks(db: None) -> None:
    """Skip unless the suite runs on a database with row locks and concurrent writers."""
    if not has_row_locks():
        pytest.skip("needs PostgreSQL or MariaDB (run with DATABASE_URL=postgres://... or mysql://...)")
