"""The Storage Contract and the stores that implement it."""

from __future__ import annotations

from .contract import (
    CancelResult,
    EnqueuedJob,
    JobStore,
    NewJob,
    PayloadTooLarge,
    ReportResult,
    RequeueResult,
    StoreError,
    TriggerResult,
    WireNameTooLong,
)


def get_store(using: str | None = None) -> JobStore:
    """The store for ``using`` (default: ``BACKWAVE['DATABASE']``): PostgreSQL gets its SQL hot paths, MariaDB
    its named locks and KILL (``store/mysql.py``), SQLite its plain-SQL claim and report
    (``store/sqlite_store.py``), every other database the portable store."""
    from django.db import connections

    from .. import conf
    from .django import DjangoStore
    from .mysql import MySQLStore
    from .postgres import PostgresStore
    from .sqlite_store import SQLiteStore

    alias = using or conf.get().database
    stores: dict[str, type[DjangoStore]] = {
        "postgresql": PostgresStore,
        "mysql": MySQLStore,
        "sqlite": SQLiteStore,
    }
    return stores.get(connections[alias].vendor, DjangoStore)(alias)


__all__ = [
    "CancelResult",
    "EnqueuedJob",
    "JobStore",
    "NewJob",
    "PayloadTooLarge",
    "ReportResult",
    "RequeueResult",
    "StoreError",
    "TriggerResult",
    "WireNameTooLong",
    "get_store",
]
