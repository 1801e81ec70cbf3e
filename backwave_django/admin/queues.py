"""The Queues page: every queue's depth per state, its paused flag and concurrency limit, and the controls.

Pause, resume and the limit go through :mod:`backwave_django.operations` with the acting user as the actor
and need the ``pause_queue`` permission; the settings rows are never saved from here.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from .. import operations
from ..core.names import queue_name_problem
from ..models import Job
from ..store import StoreError
from . import queue_rows
from .guards import GuardedAdmin

PERM_PAUSE = "backwave_django.pause_queue"
TEMPLATE = "admin/backwave_django/queues.html"


class QueueControlForm(forms.Form):
    queue = forms.CharField(max_length=128)
    operation = forms.ChoiceField(choices=[("pause", "pause"), ("resume", "resume"), ("limit", "limit")])
    concurrency_limit = forms.IntegerField(min_value=0, required=False)


class QueueSettingsAdmin(GuardedAdmin):
    def object_id_problem(self, object_id: str) -> str | None:
        return queue_name_problem(object_id)

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(PERM_PAUSE))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            return self._control(request)
        context = {
            **self.admin_site.each_context(request),
            "title": "Queues",
            "opts": self.model._meta,
            "states": Job.State.labels,
            "rows": queue_rows.queue_rows(),
            "can_control": self.has_pause_permission(request),
            "bound": queue_rows.DEPTH_BOUND,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, TEMPLATE, context)

    def _control(self, request: HttpRequest) -> HttpResponse:
        if not self.has_pause_permission(request):
            raise PermissionDenied
        form = QueueControlForm(request.POST)
        if not form.is_valid():
            messages.error(request, f"Nothing changed: {form.errors.as_text()}")
            return HttpResponseRedirect(request.path)
        queue, operation = form.cleaned_data["queue"], form.cleaned_data["operation"]
        actor = request.user.get_username()
        try:
            if operation == "pause":
                operations.pause_queue(queue, actor=actor)
                messages.success(request, f"Paused queue {queue!r}: running jobs finish, no new claims.")
            elif operation == "resume":
                operations.resume_queue(queue, actor=actor)
                messages.success(request, f"Resumed queue {queue!r}.")
            else:
                limit = form.cleaned_data["concurrency_limit"]
                operations.set_concurrency_limit(queue, limit, actor=actor)
                shown = "no cap" if limit is None else f"at most {limit} at once"
                messages.success(request, f"Concurrency limit of queue {queue!r}: {shown}.")
        except StoreError as exc:
            messages.error(request, f"Nothing changed: {exc}")
        return HttpResponseRedirect(request.path)
