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
    """The store for ``using`` (default: ``BACKWAVE['DATABASE']``): PostgreSQL gets its SQL hot paths."""
    from django.db import connections

    from .. import conf
    from .django import DjangoStore
    from .postgres import PostgresStore

    alias = using or conf.get().database
    return PostgresStore(alias) if connections[alias].vendor == "postgresql" else DjangoStore(alias)


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
