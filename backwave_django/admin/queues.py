"""The Queues page: every queue's depth per state, its paused flag and concurrency limit, and the controls.

Pause, resume and the limit go through :mod:`backwave_django.operations` with the acting user as the actor
and need the ``pause_queue`` permission; the settings rows are never saved from here. The form checks
every field first: the queue name with the project's one validator, the limit against
:data:`MAX_CONCURRENCY_LIMIT`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from .. import operations
from ..core.names import queue_name_problem
from ..models import Job
from ..store import StoreError
from ..store.contract import MAX_CONCURRENCY_LIMIT
from . import queue_rows
from .guards import GuardedAdmin
from .inputs import shown

PERM_PAUSE = "backwave_django.pause_queue"
TEMPLATE = "admin/backwave_django/queues.html"


#: The largest concurrency limit the page sets: far above what a cluster leases at once, and well inside the
#: 32-bit column (``QueueSettings.concurrency_limit``, a PositiveIntegerField) on every database.
LIMIT_RULE = f"a whole number from 0 to {MAX_CONCURRENCY_LIMIT:,}, or empty for no cap"
OPERATIONS = ["pause", "resume", "limit"]


class QueueNameField(forms.Field):
    """A queue name as typed, checked by :func:`~backwave_django.core.names.queue_name_problem` alone."""

    def to_python(self, value: Any) -> str:
        return "" if value is None else str(value)

    def validate(self, value: Any) -> None:
        problem = queue_name_problem(value)
        if problem:
            raise ValidationError(problem, code="invalid")


class ConcurrencyLimitField(forms.IntegerField):
    """0 to :data:`MAX_CONCURRENCY_LIMIT`, or empty for no cap; a refusal shows what was typed."""

    def clean(self, value: Any) -> Any:
        try:
            return super().clean(value)
        except ValidationError:
            typed = shown(str(value))
            raise ValidationError(
                f"{typed} is not a concurrency limit: use {LIMIT_RULE}", code="invalid"
            ) from None


class QueueControlForm(forms.Form):
    queue = QueueNameField()
    operation = forms.ChoiceField(
        choices=[(operation, operation) for operation in OPERATIONS],
        error_messages={"invalid_choice": f"the operation is one of {', '.join(OPERATIONS)}"},
    )
    concurrency_limit = ConcurrencyLimitField(min_value=0, max_value=MAX_CONCURRENCY_LIMIT, required=False)

    def problems(self) -> str:
        """Every field's refusal, in one line."""
        return "; ".join(str(error) for errors in self.errors.values() for error in errors)


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
            "max_limit": MAX_CONCURRENCY_LIMIT,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, TEMPLATE, context)

    def _control(self, request: HttpRequest) -> HttpResponse:
        if not self.has_pause_permission(request):
            raise PermissionDenied
        form = QueueControlForm(request.POST)
        if not form.is_valid():
            messages.error(request, f"Nothing changed: {form.problems()}.")
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
