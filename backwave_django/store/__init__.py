"""The Storage Contract and the Django store that implements it."""

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


def get_store() -> JobStore:
    """The store for the configured database (``BACKWAVE['DATABASE']``, default ``'default'``)."""
    from .. import conf
    from .django import DjangoStore

    return DjangoStore(using=conf.get().database)


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
