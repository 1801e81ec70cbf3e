"""The operations surface: jobs, quarantined and dead-lettered jobs, queues, workers and an overview.

Jobs are read-only here: no add, change or delete. Writes are admin actions that go through
:mod:`backwave_django.operations` (the store's operator actions) with the acting user as the actor.
Payloads and failure details need the ``view_job_payload`` permission; each write needs its own permission.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from . import admin_actions, admin_overview, admin_queues, admin_workers
from .admin_paging import BoundedPaginator
from .admin_readonly import ReadOnlyAdmin
from .models import (
    AuditRecord,
    DeadLetteredJob,
    Job,
    JobOverview,
    Outcome,
    PumpStatus,
    QuarantinedJob,
    QueueSettings,
)

HIDDEN = "hidden: needs the view_job_payload permission"
PERM_PAYLOAD = "backwave_django.view_job_payload"
PERM_REQUEUE = "backwave_django.requeue_job"
PERM_CANCEL = "backwave_django.cancel_job"
RECENT_ROWS = 1_000  # the Quarantined and Dead-lettered pages list the wire names of this many newest rows
SHOWN_OUTCOMES = 200  # a job has one outcome per Attempt; the detail page shows the latest ones


def can_see_payload(request: HttpRequest) -> bool:
    return bool(request.user.has_perm(PERM_PAYLOAD))


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
        from . import queues

        return queues.known_queues()


class WireNameFilter(_ValuesFilter):
    title = "wire name"
    parameter_name = field = "wire_name"

    def values(self) -> list[str]:
        from .registry import registry

        return sorted(registration.wire_name for registration in registry)


class RecentWireNameFilter(WireNameFilter):
    """The wire names among the page's newest rows (a quarantined job's may have no handler at all)."""

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        newest = model_admin.model._default_manager.order_by("-terminal_at", "-id")[:RECENT_ROWS]
        names = sorted(set(newest.values_list("wire_name", flat=True)))
        return [(name, name) for name in names]


class JobAdmin(ReadOnlyAdmin):
    list_display = ["id", "wire_name", "queue", "state", "attempts", "due_at", "last_change"]
    list_filter = ["state", QueueFilter, WireNameFilter]
    search_fields = ["wire_name"]
    search_help_text = "A job id, or the start of a wire name."
    ordering = ["-id"]
    paginator = BoundedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # a count per filter choice would scan millions of rows
    list_per_page = 50
    actions = [admin_actions.cancel]
    change_form_template = "admin/backwave_django/job/change_form.html"
    readonly_fields = ["id", "wire_name", "queue", "state", "attempts", "due_at", "created_at"]

    @admin.display(description="attempt / max")
    def attempts(self, job: Job) -> str:
        return f"{job.attempt} / {job.max_attempts}"

    @admin.display(description="last change", ordering="terminal_at")
    def last_change(self, job: Job) -> Any:
        return job.terminal_at or job.created_at

    def get_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        return [*self.readonly_fields, "terminal_at", "terminal_cause", "cancel_requested"]

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        return self.get_fields(request, obj)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        term = search_term.strip().lstrip("#")
        if not term:
            return queryset, False
        if term.isdigit():
            return queryset.filter(id=int(term)), False
        return queryset.filter(wire_name__startswith=term), False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The proxies' pages show the same rows: Job's view permission opens them too.
        return bool(request.user.has_perm("backwave_django.view_job") or super().has_view_permission(request))

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(PERM_REQUEUE))

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(PERM_CANCEL))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        job = Job.objects.filter(pk=object_id).first() if object_id.isdigit() else None
        context = {**(extra_context or {}), **(self._detail(request, job) if job else {})}
        return super().change_view(request, object_id, form_url, extra_context=context)

    def _detail(self, request: HttpRequest, job: Job) -> dict[str, Any]:
        outcomes = Outcome.objects.filter(job_id=job.id).order_by("-attempt", "-id")[:SHOWN_OUTCOMES]
        audit = AuditRecord.objects.filter(target=str(job.id)).order_by("-id")[:SHOWN_OUTCOMES]
        return {
            "job": job,
            "can_see_payload": can_see_payload(request),
            "hidden_text": HIDDEN,
            "lease": getattr(job, "lease", None) if job.state == Job.State.LEASED else None,
            "outcomes": list(outcomes),
            "audit_records": list(audit),
        }


class _TerminalJobAdmin(JobAdmin):
    """A page for one terminal state, newest first, each row saying why it ended there."""

    list_display = ["id", "wire_name", "queue", "attempts", "terminal_at", "why"]
    list_filter = [QueueFilter, RecentWireNameFilter]
    ordering = ["-terminal_at", "-id"]
    actions = [admin_actions.requeue, admin_actions.cancel]

    @admin.display(description="why")
    def why(self, job: Job) -> str:
        return job.terminal_cause or "(no cause recorded)"


class QuarantinedJobAdmin(_TerminalJobAdmin):
    pass


class DeadLetteredJobAdmin(_TerminalJobAdmin):
    @admin.display(description="why (last failure)")
    def why(self, job: Job) -> str:
        return f"{job.terminal_cause or '(no cause recorded)'} after {job.attempt} attempt(s)"


admin.site.register(Job, JobAdmin)
admin.site.register(QuarantinedJob, QuarantinedJobAdmin)
admin.site.register(DeadLetteredJob, DeadLetteredJobAdmin)
admin.site.register(QueueSettings, admin_queues.QueueSettingsAdmin)
admin.site.register(PumpStatus, admin_workers.PumpStatusAdmin)
admin.site.register(JobOverview, admin_overview.OverviewAdmin)
