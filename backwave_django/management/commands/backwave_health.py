"""``manage.py backwave_health``: each Pump's state from the database; non-zero when a group is down."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from ... import conf
from ...health import group_reports
from ...store import get_store
from .. import arguments


class Command(BaseCommand):
    help = (
        "Report each Pump's last recorded state; exit 1 when a worker group has no running pump "
        "(halted or silent), counting only --host's pumps when it is given. With --ready, a group whose "
        "pumps are all degraded fails too. The health endpoint (backwave_django.urls) answers the same."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--group", action="append", dest="groups", help="Only these groups (default: all configured)."
        )
        parser.add_argument(
            "--host", help="Only pumps on this host (e.g. $(hostname)), for a per-machine probe."
        )
        parser.add_argument(
            "--ready",
            action="store_true",
            help="Readiness: fail unless a pump of each group runs and is not degraded (default: liveness).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.get()
        names = arguments.repeated(options, "groups", "--group") or list(settings.groups)
        unknown = [name for name in names if name not in settings.groups]
        if unknown:
            raise CommandError(f"unknown group {unknown[0]!r}; configured: {sorted(settings.groups)}")
        reports = group_reports(
            get_store(settings.database), settings, names, now=timezone.now(), host=options["host"]
        )
        for report in reports:
            for row in report.pumps:
                line = f"{report.group}  {row.pump.worker_id}  {row.observed}  "
                line += f"last beat {row.age_seconds:.0f} s ago  {row.pump.detail}"
                self.stdout.write(line.rstrip())
            if report.up:
                self.stdout.write(f"{report.group}: {report.serving} pump(s) running")
            else:
                self.stdout.write(f"{report.group}: no running pump (halted, silent or not started)")
        probe = "ready" if options["ready"] else "live"
        failing = [report.group for report in reports if not report.passes(probe)]
        if failing:
            verdict = "not ready (every pump degraded, halted or silent)" if probe == "ready" else "down"
            raise CommandError(f"worker group(s) {verdict}: {', '.join(failing)}")
