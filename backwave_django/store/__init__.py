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
    its named locks and KILL (``store/mysql.py``), every other database the portable store."""
    from django.db import connections

    from .. import conf
    from .django import DjangoStore
    from .mysql import MySQLStore
    from .postgres import PostgresStore

    alias = using or conf.get().database
    stores: dict[str, type[DjangoStore]] = {"postgresql": PostgresStore, "mysql": MySQLStore}
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
