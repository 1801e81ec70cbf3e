"""Shared fixtures. The suite runs once per database: SQLite by default, PostgreSQL by DATABASE_URL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from backwave_django.store.django import DjangoStore

from . import jobs  # noqa: F401  (registers the tests.* jobs)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(minutes=1)


@pytest.fixture
def store(db: None) -> DjangoStore:
    return DjangoStore("default")


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
