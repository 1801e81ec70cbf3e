"""``manage.py backwave_health``: each Pump's state from the database; non-zero when a group is down."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from ... import conf
from ...models import PumpStatus


class Command(BaseCommand):
    help = (
        "Report each Pump's last recorded state; exit 1 when a worker group has no running pump "
        "(halted or silent), counting only --host's pumps when it is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--group", action="append", dest="groups", help="Only these groups (default: all configured)."
        )
        parser.add_argument(
            "--host", help="Only pumps on this host (e.g. $(hostname)), for a per-machine probe."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.get()
        names = options["groups"] or list(settings.groups)
        now = timezone.now()
        failing = []
        for name in names:
            group = settings.groups.get(name)
            if group is None:
                raise CommandError(f"unknown group {name!r}; configured: {sorted(settings.groups)}")
            silent_after = max(group.heartbeat_interval * 3, timedelta(seconds=15))
            rows = PumpStatus.objects.using(settings.database).filter(group=name).exclude(health="stopped")
            if options["host"]:
                rows = rows.filter(host=options["host"])
            live = []
            for row in rows.order_by("worker_id"):
                silent = now - row.last_beat_at > silent_after
                state = "silent" if silent and row.health != "halted" else row.health
                age = (now - row.last_beat_at).total_seconds()
                self.stdout.write(
                    f"{name}  {row.worker_id}  {state}  last beat {age:.0f} s ago  {row.detail}".rstrip()
                )
                if state in ("running", "degraded"):
                    live.append(row)
            if not live:
                failing.append(name)
                self.stdout.write(f"{name}: no running pump (halted, silent or not started)")
            else:
                self.stdout.write(f"{name}: {len(live)} pump(s) running")
        if failing:
            raise CommandError(f"worker group(s) down: {', '.join(failing)}")
