"""The Schedules page: every stored schedule with its cadence, next and last run and recent skips, and the
operator actions pause, resume and "run now".

The actions go through :mod:`backwave_django.operations` with the acting user as the actor (each is audited)
and need the ``operate_schedule`` permission. Rows are never saved from here: workers write them from
``BACKWAVE['SCHEDULES']`` when they start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html_join

from .. import operations
from ..core.names import queue_name_problem
from ..models import Schedule
from ..schedules import describe
from ..store.contract import TriggerResult
from ..store.scheduling import schedule_view
from .guards import Check, GuardedAdmin
from .inputs import choice_problem

PERM_OPERATE = "backwave_django.operate_schedule"
#: A schedule's page, top to bottom.
DETAIL = ["name", "status", "cadence", "timezone", "misfire", "no_overlap", "next_run", "last_run"]
DETAIL += ["skipped_count", "recent_skips_list", "queue", "wire_name", "payload", "max_attempts", "timeout"]
DETAIL += ["cursor", "removed_at", "created_at", "updated_at"]
SCHEDULE_LOOKUPS: Mapping[str, Check] = {
    "paused__exact": partial(choice_problem, what="paused", choices=["0", "1"]),
}


def _about(row: Schedule) -> dict[str, Any]:
    about: dict[str, Any] = getattr(row, "_about", None) or describe(schedule_view(row))
    row._about = about  # type: ignore[attr-defined]  # one description per row and request
    return about


def _when(at: datetime | None) -> str:
    return "-" if at is None else f"{timezone.localtime(at):%Y-%m-%d %H:%M:%S %Z}"


class ScheduleAdmin(GuardedAdmin):
    list_display = ["name", "status", "cadence", "timezone", "next_run", "last_run", "skipped_count"]
    list_display += ["recent_skips_shown", "queue", "wire_name"]
    list_filter = ["paused"]
    search_fields = ["name", "wire_name", "queue"]
    ordering = ["name"]
    allowed_lookups = SCHEDULE_LOOKUPS
    actions = ["pause_schedules", "resume_schedules", "run_now"]
    readonly_fields = DETAIL

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        """The arguments (KWARGS) need ``view_job_payload``, as a job's payload does."""
        if request.user.has_perm("backwave_django.view_job_payload"):
            return tuple(DETAIL)
        return tuple(field for field in DETAIL if field != "payload")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)

    def object_id_problem(self, object_id: str) -> str | None:
        return queue_name_problem(object_id)  # schedule names follow the queue-name rule

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(PERM_OPERATE))

    @admin.display(description="status")
    def status(self, row: Schedule) -> str:
        return str(_about(row)["status"])

    @admin.display(description="cadence")
    def cadence(self, row: Schedule) -> str:
        return str(_about(row)["cadence"])

    @admin.display(description="next run")
    def next_run(self, row: Schedule) -> str:
        return _when(_about(row)["next_run"])

    @admin.display(description="last run", ordering="last_run_at")
    def last_run(self, row: Schedule) -> str:
        return _when(row.last_run_at)

    @admin.display(description="recent skips")
    def recent_skips_shown(self, row: Schedule) -> str:
        skips = _about(row)["recent_skips"]
        if not skips:
            return "-"
        return _when(skips[-1]) + (f" and {len(skips) - 1} before" if len(skips) > 1 else "")

    @admin.display(description="recent skips (newest last)")
    def recent_skips_list(self, row: Schedule) -> str:
        skips = _about(row)["recent_skips"]
        return format_html_join("", "<div>{}</div>", ((_when(at),) for at in skips)) or "-"

    def _each(
        self,
        request: HttpRequest,
        queryset: QuerySet[Schedule],
        verb: str,
        one: Callable[[str, str], bool],
    ) -> None:
        actor = request.user.get_username()
        done = [row.name for row in queryset if one(row.name, actor)]
        missed = sorted(set(queryset.values_list("name", flat=True)) - set(done))
        if done:
            messages.success(request, f"{verb}: {', '.join(done)}.")
        if missed:
            messages.warning(request, f"Not {verb.lower()} (removed from the settings): {', '.join(missed)}.")

    @admin.action(description="Pause the selected schedules", permissions=["operate"])
    def pause_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._each(request, queryset, "Paused", _pause)

    @admin.action(description="Resume the selected schedules", permissions=["operate"])
    def resume_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._each(request, queryset, "Resumed", _resume)

    @admin.action(description="Run the selected schedules now, once", permissions=["operate"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._each(request, queryset, "Ran now", _trigger)


def _pause(name: str, actor: str) -> bool:
    return operations.pause_schedule(name, actor=actor)


def _resume(name: str, actor: str) -> bool:
    return operations.resume_schedule(name, actor=actor)


def _trigger(name: str, actor: str) -> bool:
    return operations.trigger_schedule(name, actor=actor) is TriggerResult.TRIGGERED
