"""The Storage Contract and the stores that implement it."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from .django import DjangoStore


def get_store(using: str | None = None) -> JobStore:
    """The store for ``using`` (default: ``BACKWAVE['DATABASE']``): PostgreSQL gets its SQL hot paths, MariaDB
    its named locks and KILL (``store/mysql.py``), SQLite its plain-SQL claim and report
    (``store/sqlite_store.py``), every other database the portable store."""
    from django.db import connections

    from .. import conf

    alias = using or conf.get().database
    stores = store_classes()
    return stores.get(connections[alias].vendor, stores[""])(alias)


def store_classes() -> dict[str, type[DjangoStore]]:
    """Each database vendor's store ("": the portable one, for any other). The first call imports them
    (about 40 ms on a 2-core machine): the app's ``ready()`` makes it, so that the first enqueue of a web
    process does not."""
    from .django import DjangoStore
    from .mysql import MySQLStore
    from .postgres import PostgresStore
    from .sqlite_store import SQLiteStore

    return {"postgresql": PostgresStore, "mysql": MySQLStore, "sqlite": SQLiteStore, "": DjangoStore}


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
