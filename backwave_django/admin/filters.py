"""The job lists' filters by queue and by wire name, listed from cheap sources rather than a DISTINCT over
the job table (which has millions of rows)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from . import queue_rows

RECENT_ROWS = 1_000  # the Quarantined and Dead-lettered pages list the wire names of this many newest rows
SHOWN_TAGS = 50  # the tag filter lists at most this many of the tags given most recently


class _ValuesFilter(admin.SimpleListFilter):
    """Filter by one column's values, listed from a cheap source rather than a DISTINCT over the table."""

    field = ""

    def values(self) -> list[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [(value, value) for value in self.values()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class QueueFilter(_ValuesFilter):
    title = "queue"
    parameter_name = field = "queue"

    def values(self) -> list[str]:
        return queue_rows.known_queues()


class WireNameFilter(_ValuesFilter):
    title = "wire name"
    parameter_name = field = "wire_name"

    def values(self) -> list[str]:
        from ..registry import registry

        return [registration.wire_name for registration in registry.all()]


class RecentWireNameFilter(WireNameFilter):
    """The wire names among the page's newest rows (a quarantined job's may have no handler at all)."""

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        newest = model_admin.model._default_manager.order_by("-terminal_at", "-id")[:RECENT_ROWS]
        names = sorted(set(newest.values_list("wire_name", flat=True)))
        return [(name, name) for name in names]


class TagFilter(admin.SimpleListFilter):
    """Jobs that carry one tag (a stored form: ``urgent``, ``tenant:acme``). It lists the tags of the newest
    tag rows (read backwards along the key, never a GROUP BY over the table); any other tag works through
    ``?tag=...`` or the search box (``tag:...``). The filter reads the index that leads with the tag."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        from ..models import JobTag

        newest = JobTag.objects.order_by("-id").values_list("tag", flat=True)[:RECENT_ROWS]
        tags = sorted(set(newest))[:SHOWN_TAGS]
        return [(tag, tag) for tag in tags]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(tags__tag=value) if value else queryset


class WaitingFilter(admin.SimpleListFilter):
    """Jobs waiting on a parent (state awaiting_parent), newest first along ``backwave_job_awaiting``."""

    title = "waiting on a parent"
    parameter_name = "waiting"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [("yes", "yes")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(state="awaiting_parent") if self.value() == "yes" else queryset
