"""The Jobs, Quarantined jobs and Dead-lettered jobs pages: lists, search, and each job's read-only detail.

Jobs are read-only here: no add, change or delete. Writes are the admin actions in :mod:`.actions`.
Payloads and failure details need the ``view_job_payload`` permission.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from ..core.names import queue_name_problem, wire_name_problem
from ..core.tags import stored_tag_problem
from ..models import AuditRecord, Dependency, Job, JobTag, Outcome
from . import actions
from .filters import QueueFilter, RecentWireNameFilter, TagFilter, WaitingFilter, WireNameFilter
from .guards import Check, GuardedAdmin
from .inputs import as_job_id, choice_problem, job_id_problem, tell_once
from .paging import BoundedPaginator
from .search import parse_job_search

HIDDEN = "hidden: needs the view_job_payload permission"
PERM_PAYLOAD = "backwave_django.view_job_payload"
PERM_REQUEUE = "backwave_django.requeue_job"
PERM_CANCEL = "backwave_django.cancel_job"
SHOWN_OUTCOMES = 200  # a job has one outcome per Attempt; the detail page shows the latest ones
SHOWN_EDGES = 200  # parents and children on the detail page, newest first (a job may have thousands)

_state_problem = partial(choice_problem, what="state", choices=Job.State.values)

#: The filters' parameters and plain lookups on listed columns, each with its value's check. Payloads,
#: outcomes and leases are never offered.
JOB_LOOKUPS: Mapping[str, Check] = {
    "id": job_id_problem,
    "state": _state_problem,
    "state__exact": _state_problem,
    "queue": queue_name_problem,
    "wire_name": wire_name_problem,
    "tag": stored_tag_problem,  # the tag filter's parameter: a stored tag, never a lookup into another table
    "waiting": partial(choice_problem, what="waiting", choices=["yes"]),
}


def can_see_payload(request: HttpRequest) -> bool:
    return bool(request.user.has_perm(PERM_PAYLOAD))


class JobAdmin(GuardedAdmin):
    list_display = ["id", "wire_name", "queue", "state", "attempts", "due_at", "last_change"]
    list_filter = ["state", WaitingFilter, QueueFilter, WireNameFilter, TagFilter]
    search_fields = ["wire_name"]
    search_help_text = (
        "A job id, a tag (tag:urgent, tag:tenant:acme, or tag:tenant: for every tenant), or the start of a "
        "wire name."
    )
    ordering = ["-id"]
    paginator = BoundedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # a count per filter choice would scan millions of rows
    list_per_page = 50
    actions = [actions.cancel]
    change_form_template = "admin/backwave_django/job/change_form.html"
    readonly_fields = ["id", "wire_name", "queue", "state", "attempts", "due_at", "created_at"]
    allowed_lookups = JOB_LOOKUPS

    @admin.display(description="attempt / max")
    def attempts(self, job: Job) -> str:
        return f"{job.attempt} / {job.max_attempts}"

    @admin.display(description="last change", ordering="terminal_at")
    def last_change(self, job: Job) -> Any:
        return job.terminal_at or job.created_at

    def get_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:  # type: ignore[override]
        more = ["priority", "unique_key", "terminal_at", "terminal_cause", "cancel_requested", "run_on"]
        more += ["parents_remaining"]
        return [*self.readonly_fields, *more]

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        return self.get_fields(request, obj)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        search = parse_job_search(search_term)
        if search.problem:
            tell_once(request, f"Nothing matches: {search.problem}.")
            return queryset.none(), False
        if search.job_id is not None:
            return queryset.filter(id=search.job_id), False
        if search.wire_name_prefix:
            return queryset.filter(wire_name__startswith=search.wire_name_prefix), False
        if search.tag:
            return queryset.filter(tags__tag=search.tag), False
        if search.tag_key:  # a job holds each tag once, but may hold several of one key: distinct
            return queryset.filter(tags__tag__startswith=f"{search.tag_key}:").distinct(), True
        return queryset, False

    def object_id_problem(self, object_id: str) -> str | None:
        return job_id_problem(object_id)

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        problem = next((problem for problem in map(job_id_problem, selected) if problem), None)
        if problem:
            messages.error(request, f"No action was run: among the selected jobs, {problem}.")
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset, *args, **kwargs)

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
        job_id = as_job_id(object_id)
        job = Job.objects.filter(pk=job_id).first() if job_id is not None else None
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
            "tags": list(JobTag.objects.filter(job_id=job.id).order_by("tag").values_list("tag", flat=True)),
            **self._edges(job),
        }

    def _edges(self, job: Job) -> dict[str, Any]:
        """Its parents and children (the newest ``SHOWN_EDGES`` of each), with their states and links."""
        edges = Dependency.objects.order_by("-id")
        parents = edges.filter(child_id=job.id).values_list("parent_id", "parent__state", "resolution")
        children: Any = []
        if job.has_children:
            children = edges.filter(parent_id=job.id).values_list("child_id", "child__state", "resolution")
        return {
            "parent_edges": [self._edge(*row) for row in parents[:SHOWN_EDGES]],
            "child_edges": [self._edge(*row) for row in children[:SHOWN_EDGES]],
        }

    def _edge(self, job_id: int, state: str, resolution: str) -> dict[str, Any]:
        url = reverse(f"{self.admin_site.name}:backwave_django_job_change", args=[job_id])
        return {"id": job_id, "state": state, "resolution": resolution or "open", "url": url}


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
