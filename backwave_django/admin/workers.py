"""The Workers page: what each Pump last said about itself, read-only."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any

from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils import timezone

from ..models import Lease, PumpStatus
from .guards import Check, GuardedAdmin
from .inputs import choice_problem, text_problem

MAX_GROUP_LENGTH = 128  # PumpStatus.group

#: The two filters' parameters, each with its value's check.
WORKER_LOOKUPS: Mapping[str, Check] = {
    "health__exact": partial(choice_problem, what="health", choices=PumpStatus.Health.values),
    "group": partial(text_problem, what="group", max_length=MAX_GROUP_LENGTH),
}


def describe_age(age: timedelta) -> str:
    seconds = max(0, int(age.total_seconds()))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


class PumpStatusAdmin(GuardedAdmin):
    list_display = ["group", "worker_id", "host", "health", "reason", "last_beat_at", "last_beat_age"]
    list_display += ["in_flight", "queues"]
    list_filter = ["health", "group"]
    search_fields = ["worker_id", "host"]
    ordering = ["group", "worker_id"]
    allowed_lookups = WORKER_LOOKUPS
    readonly_fields = ["worker_id", "group", "host", "pid", "queues", "health", "detail"]
    readonly_fields += ["started_at", "last_beat_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PumpStatus]:
        leases = Lease.objects.filter(owner=OuterRef("worker_id")).order_by().values("owner")
        in_flight = Subquery(leases.annotate(n=Count("*")).values("n"), output_field=IntegerField())
        queryset: QuerySet[PumpStatus] = super().get_queryset(request)
        return queryset.annotate(in_flight_count=Coalesce(in_flight, 0))

    @admin.display(description="reason")
    def reason(self, pump: PumpStatus) -> str:
        return pump.detail or "-"

    @admin.display(description="age")
    def last_beat_age(self, pump: PumpStatus) -> str:
        return describe_age(timezone.now() - pump.last_beat_at)

    @admin.display(description="jobs in flight", ordering="in_flight_count")
    def in_flight(self, pump: Any) -> int:
        return int(pump.in_flight_count)
