"""The Storage Contract and the Django store that implements it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .contract import (
    CancelResult,
    JobStore,
    NewJob,
    PayloadTooLarge,
    ReportResult,
    RequeueResult,
    StoreError,
    WireNameTooLong,
)

if TYPE_CHECKING:
    from .django import DjangoStore


def get_store(using: str | None = None) -> DjangoStore:
    """The store for ``using`` (default: ``BACKWAVE['DATABASE']``): PostgreSQL gets its SQL hot paths."""
    from django.db import connections

    from .. import conf
    from .django import DjangoStore
    from .postgres import PostgresStore

    alias = using or conf.get().database
    return PostgresStore(alias) if connections[alias].vendor == "postgresql" else DjangoStore(alias)


__all__ = [
    "CancelResult",
    "JobStore",
    "NewJob",
    "PayloadTooLarge",
    "ReportResult",
    "RequeueResult",
    "StoreError",
    "WireNameTooLong",
    "get_store",
]
