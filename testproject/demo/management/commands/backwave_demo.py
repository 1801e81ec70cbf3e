"""The demo: enqueue a mix of jobs, run the worker group until they are done, and show what happened."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import django
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from django.utils import timezone

from backwave_django.models import Job, Outcome
from demo.jobs import add, always_fails, flaky_report, send_welcome_email


class Command(BaseCommand):
    help = "Enqueue demo jobs, run backwave_pump --burst until they are done, and print the result."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--emails", type=int, default=50, help="How many welcome-email jobs (default 50)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"database: {connection.vendor} ({connection.settings_dict['NAME']})")
        first = (Job.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
        send_welcome_email.enqueue_many([{"user_id": n} for n in range(options["emails"])])
        flaky_report.enqueue(report_id=7, fail_times=2)
        always_fails.enqueue(reason="this job always raises")
        add.enqueue(amounts=[Decimal("1.25"), Decimal("2.50")])
        add.using(unique_key="one-sum-at-a-time").enqueue(amounts=[Decimal("10")])
        duplicate = add.using(unique_key="one-sum-at-a-time").enqueue(amounts=[Decimal("20")])
        self.stdout.write(f"a second sum with the same unique key was not written: it is job #{duplicate.id}")
        if django.VERSION >= (6, 0):  # Django's own Tasks framework, on backwave's backend (TASKS)
            from demo.tasks import greet, word_count

            word_count.enqueue("durable background jobs for Django")
            greet.enqueue(name="world")
        # A row an older deployment might have left: no handler is registered for it any more.
        Job.objects.create(
            wire_name="demo.retired-job", payload="{}", due_at=timezone.now(), created_at=timezone.now()
        )
        jobs = Job.objects.filter(id__gte=first)
        self.stdout.write(f"enqueued {jobs.count()} jobs; running the worker group until they are done...\n")
        call_command("backwave_pump", burst=True, stdout=self.stdout, stderr=self.stderr)

        self.stdout.write("\nwhat happened:")
        for state, label in Job.State.choices:
            count = jobs.filter(state=state).count()
            if count:
                self.stdout.write(f"  {label:>15}: {count}")
        for job in jobs.exclude(wire_name="demo.send-welcome-email").order_by("id"):
            outcomes = Outcome.objects.filter(job=job).order_by("attempt", "id")
            trail = ", ".join(f"attempt {o.attempt} {o.kind}" for o in outcomes)
            cause = f" ({job.terminal_cause})" if job.terminal_cause else ""
            output = f" -> {job.output!r}" if job.output_json is not None else ""
            self.stdout.write(f"  {job.wire_name} #{job.id}: {job.state}{cause}{output}; {trail}")
        pending = jobs.filter(state__in=["scheduled", "leased", "awaiting_parent"]).count()
        if pending:
            self.stderr.write(f"{pending} jobs were left unfinished")
