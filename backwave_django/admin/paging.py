"""A paginator for tables with millions of rows: it never runs an unbounded ``COUNT(*)``.

Unfiltered on PostgreSQL it reads the planner's estimate (``pg_class.reltuples``); otherwise it counts at most
``BOUND + 1`` rows through a sliced subquery, so a changelist costs the same on a thousand rows or a billion.
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.db import connections
from django.utils.functional import cached_property

BOUND = 10_000
ESTIMATE = "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass"


class BoundedPaginator(Paginator):  # type: ignore[type-arg]  # pages of any model
    """``count`` is exact up to :data:`BOUND`, then ``BOUND + 1`` (or the estimate when unfiltered)."""

    @cached_property
    def count(self) -> int:
        queryset: Any = self.object_list
        query = getattr(queryset, "query", None)
        if query is None:
            return len(queryset)
        if not query.where and connections[queryset.db].vendor == "postgresql":
            with connections[queryset.db].cursor() as cursor:
                cursor.execute(ESTIMATE, [queryset.model._meta.db_table])
                row = cursor.fetchone()
            if row and row[0] > BOUND:
                return int(row[0])
        return int(queryset.order_by()[: BOUND + 1].count())
