"""The Overview page: counts per queue and state, outcomes per minute (inline SVG), oldest due, workers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone

from .. import conf
from ..core.retention import SUCCEEDED_CLASS
from ..models import Job, PumpStatus
from ..store import get_store
from . import chart, queue_rows
from .guards import GuardedAdmin
from .workers import describe_age

TEMPLATE = "admin/backwave_django/overview.html"


class OverviewAdmin(GuardedAdmin):
    """Not a list of rows: its changelist is the Overview page. Opens with Job's view permission.

    It has no other URL: Django's per-object pages (change, history, delete) of this proxy of Job would show
    every field of a job, its payload among them, to anyone who may open the Overview.
    """

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return [path("", self.admin_site.admin_view(self.changelist_view), name=name)]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm("backwave_django.view_job") or super().has_view_permission(request))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        now = timezone.now()
        since, succeeded, failed = chart.outcomes_per_minute(now)
        oldest = queue_rows.oldest_due(now)
        pumps = list(PumpStatus.objects.order_by("group", "worker_id"))
        context = {
            **self.admin_site.each_context(request),
            "title": "Overview",
            "opts": self.model._meta,
            "states": Job.State.labels,
            "rows": queue_rows.queue_rows(),
            "bound": queue_rows.DEPTH_BOUND,
            "bars": chart.bars(since, succeeded, failed),
            "chart_width": chart.MINUTES * chart.BAR_WIDTH,
            "chart_height": chart.CHART_HEIGHT,
            "bar_width": chart.BAR_WIDTH - 2,
            "succeeded_total": sum(succeeded),
            "failed_total": sum(failed),
            "oldest_due": [(queue, due, describe_age(now - due)) for queue, due in sorted(oldest.items())],
            "pumps": [(pump, describe_age(now - pump.last_beat_at)) for pump in pumps],
            "oldest_finished": oldest_finished(now),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, TEMPLATE, context)


def oldest_finished(now: datetime) -> list[tuple[str, datetime, str, str]]:
    """Per terminal state: when its oldest stored job finished, how long ago, and the default retention
    (what maintenance purges next; per-queue overrides may keep some longer)."""
    settings = conf.get()
    found = get_store(settings.database).oldest_finished()
    rows = []
    for state, at in sorted(found.items(), key=lambda item: item[1]):
        keep = settings.retention.succeeded if state in SUCCEEDED_CLASS else settings.retention.failed
        kept = "for ever" if keep is None else describe_age(keep).removesuffix(" ago")
        rows.append((Job.State(state).label, at, describe_age(now - at), kept))
    return rows
