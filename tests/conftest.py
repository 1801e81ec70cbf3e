"""Shared fixtures. The suite runs once per database: SQLite by default, PostgreSQL by DATABASE_URL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db import connection

from backwave_django.store import get_store
from backwave_django.store.django import DjangoStore

from . import jobs  # noqa: F401  (registers the tests.* jobs)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(minutes=1)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests that take ``store`` run once per store the suite certifies on this database: on PostgreSQL the
    native PostgresStore (SQL hot paths) and the portable ORM store; on SQLite the one store there is."""
    if "store" in metafunc.fixturenames:
        engine = settings.DATABASES["default"]["ENGINE"]
        kinds = ["postgres", "portable"] if "postgresql" in engine else ["sqlite"]
        metafunc.parametrize("store_kind", kinds)


@pytest.fixture
def store(store_kind: str, db: None) -> DjangoStore:
    return DjangoStore("default") if store_kind == "portable" else get_store("default")


@pytest.fixture
def t0() -> datetime:
    return T0


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture
def postgres(db: None) -> None:
    """Skip unless the suite runs on PostgreSQL."""
    if not on_postgres():
        pytest.skip("needs PostgreSQL (run with DATABASE_URL=postgres://...)")
