"""The admin's job actions: requeue and cancel, each behind a confirmation page and the store's operations.

Every write goes through :mod:`backwave_django.operations` with the acting user as the actor; nothing here
saves a model. Each action reports how many jobs changed and how many were skipped, grouped by reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from .. import operations
from ..models import Job
from ..registry import registry
from ..store import CancelResult, RequeueResult

CONFIRM_TEMPLATE = "admin/backwave_django/confirm_action.html"
SHOWN_ON_CONFIRM = 100  # the confirmation page lists at most this many of the selected jobs


def _requeue_one(job: Job, actor: str) -> str | None:
    """None when requeued, else why not."""
    if job.state == Job.State.QUARANTINED and job.wire_name not in registry:
        return f"no handler is registered for wire name {job.wire_name!r} in this deployment"
    result = operations.requeue_job(job.id, actor=actor)
    if result is RequeueResult.NOT_REQUEUEABLE:
        return "not dead-lettered or quarantined any more"
    if result is RequeueResult.KEY_TAKEN:
        return "an unfinished job of the same wire name holds its unique key"
    return None


def _cancel_one(job: Job, actor: str) -> str | None:
    result = operations.cancel_job(job.id, actor=actor)
    if result is CancelResult.NOT_CANCELLABLE:
        return f"already finished ({job.state})"
    return "running: asked to stop at its next heartbeat" if result is CancelResult.REQUESTED else None


def _report(request: HttpRequest, verb: str, changed: int, skipped: Counter[str]) -> None:
    text = f"{verb} {changed} job{'s' if changed != 1 else ''}."
    if skipped:
        reasons = "; ".join(f"{reason} ({count})" for reason, count in sorted(skipped.items()))
        text += f" Skipped {skipped.total()}: {reasons}."
    level = messages.SUCCESS if changed and not skipped else messages.WARNING
    messages.add_message(request, level, text)


def _run(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    action: str,
    verb: str,
    one: Callable[[Job, str], str | None],
) -> TemplateResponse | None:
    if request.POST.get("confirmed") != "yes":
        opts = modeladmin.model._meta
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": f"Are you sure you want to {action} these jobs?",
            "opts": opts,
            "action": action,
            "verb": verb,
            "jobs": list(queryset.order_by("id")[:SHOWN_ON_CONFIRM]),
            "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across", "0"),
            "shown": SHOWN_ON_CONFIRM,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        request.current_app = modeladmin.admin_site.name
        return TemplateResponse(request, CONFIRM_TEMPLATE, context)
    actor = request.user.get_username()
    changed, skipped = 0, Counter[str]()
    for job in queryset.order_by("id").iterator():
        reason = one(job, actor)
        if reason is None:
            changed += 1
        else:
            skipped[reason] += 1
    if action == "cancel":  # a cancel request on a running job is a change too, reported apart
        requested = skipped.pop("running: asked to stop at its next heartbeat", 0)
        changed += requested
    _report(request, verb, changed, skipped)
    return None


@admin.action(description="Requeue the selected jobs (from attempt 0, now)", permissions=["requeue"])
def requeue(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]
) -> TemplateResponse | None:
    return _run(modeladmin, request, queryset, action="requeue", verb="Requeued", one=_requeue_one)


@admin.action(description="Cancel the selected jobs", permissions=["cancel"])
def cancel(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]
) -> TemplateResponse | None:
    return _run(modeladmin, request, queryset, action="cancel", verb="Cancelled", one=_cancel_one)
