"""``manage.py backwave_schedules``: every stored schedule, its next and last run, and what it skipped."""

from __future__ import annotations

import json
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from ... import conf
from ...registry import registry
from ...schedules import describe, sync
from ...store import get_store
from ...store.contract import ScheduleView


class Command(BaseCommand):
    help = (
        "List every schedule: its cadence and zone, next and last run, skipped ticks, and whether it is "
        "paused or removed. Workers store BACKWAVE['SCHEDULES'] when they start; --sync stores them now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--sync",
            action="store_true",
            help="Store the settings' schedules first, as a starting worker does.",
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object per schedule.")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.get()
        store = get_store(settings.database)
        now = timezone.now()
        if options["sync"]:
            result = sync(store, settings, registry, now=now)
            changes = {"added": result.added, "changed": result.changed, "removed": result.removed}
            for verb, names in changes.items():
                if names:
                    self.stdout.write(f"{verb}: {', '.join(names)}")
        views = store.list_schedules()
        stale = sorted(set(settings.schedules) - {view.name for view in views if view.removed_at is None})
        if options["json"]:
            for view in views:
                self.stdout.write(json.dumps(describe(view), default=str))
            return
        if not views:
            self.stdout.write("No schedules stored.")
        for view in views:
            self.stdout.write(_lines(view))
        if stale and not options["sync"]:
            self.stdout.write(
                self.style.WARNING(
                    f"In the settings but not stored yet: {', '.join(stale)} (a starting worker stores them; "
                    "or run with --sync)."
                )
            )


def _lines(view: ScheduleView) -> str:
    about = describe(view)
    zone: tzinfo = ZoneInfo(about["timezone"]) if about["timezone"] != "UTC" else UTC
    status = about["status"]
    head = f"{view.name}  [{status}]  {about['cadence']}  ({about['timezone']}, misfire {about['misfire']}"
    head += ", no overlap)" if about["no_overlap"] else ")"
    rows = [
        head,
        f"    job {about['job']} in queue {about['queue']}",
        f"    next run  {_when(about['next_run'], zone)}",
        f"    last run  {_when(about['last_run'], zone)}",
        f"    skipped   {about['skipped']} tick(s)"
        + (f", latest {_when(about['recent_skips'][-1], zone)}" if about["recent_skips"] else ""),
    ]
    return "\n".join(rows)


def _when(at: datetime | None, zone: tzinfo) -> str:
    if at is None:
        return "-"
    local = at.astimezone(zone)
    shown = local.isoformat(sep=" ", timespec="seconds")
    return shown if zone is UTC else f"{shown} ({at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)"
