"""The Jobs, Quarantined jobs and Dead-lettered jobs pages: lists, search, and each job's read-only detail.

Jobs are read-only here: no add, change or delete. Writes are the admin actions in :mod:`.actions`.
Payloads and failure details need the ``view_job_payload`` permission.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from ..models import AuditRecord, Job, Outcome
from . import actions
from .filters import QueueFilter, RecentWireNameFilter, WireNameFilter
from .guards import GuardedAdmin
from .paging import BoundedPaginator

HIDDEN = "hidden: needs the view_job_payload permission"
PERM_PAYLOAD = "backwave_django.view_job_payload"
PERM_REQUEUE = "backwave_django.requeue_job"
PERM_CANCEL = "backwave_django.cancel_job"
SHOWN_OUTCOMES = 200  # a job has one outcome per Attempt; the detail page shows the latest ones


def can_see_payload(request: HttpRequest) -> bool:
    return bool(request.user.has_perm(PERM_PAYLOAD))


class JobAdmin(GuardedAdmin):
    list_display = ["id", "wire_name", "queue", "state", "attempts", "due_at", "last_change"]
    list_filter = ["state", QueueFilter, WireNameFilter]
    search_fields = ["wire_name"]
    search_help_text = "A job id, or the start of a wire name."
    ordering = ["-id"]
    paginator = BoundedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # a count per filter choice would scan millions of rows
    list_per_page = 50
    actions = [actions.cancel]
    change_form_template = "admin/backwave_django/job/change_form.html"
    readonly_fields = ["id", "wire_name", "queue", "state", "attempts", "due_at", "created_at"]
    # The filters' parameters and plain lookups on listed columns; payloads and outcomes are never offered.
    allowed_lookups = frozenset({"id", "state", "state__exact", "queue", "wire_name"})

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
    actions = [actions.requeue, actions.cancel]

    @admin.display(description="why")
    def why(self, job: Job) -> str:
        return job.terminal_cause or "(no cause recorded)"


class QuarantinedJobAdmin(_TerminalJobAdmin):
    pass


class DeadLetteredJobAdmin(_TerminalJobAdmin):
    @admin.display(description="why (last failure)")
    def why(self, job: Job) -> str:
        return f"{job.terminal_cause or '(no cause recorded)'} after {job.attempt} attempt(s)"
