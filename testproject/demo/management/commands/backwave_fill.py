"""Fill the database with N mixed-state jobs (default a million), fast, to try the admin at scale.

PostgreSQL: one ``INSERT ... SELECT generate_series`` for the jobs and one for the outcomes, then
``VACUUM ANALYZE``. SQLite: ``bulk_create`` in batches. The mix, per hundred jobs: 70 succeeded, 10 scheduled
and due, 5 dead-lettered (each with a failed outcome), 3 quarantined under a wire name no handler has,
5 cancelled, 7 scheduled for tomorrow; finished jobs are spread over the last day, across four queues.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction
from django.utils import timezone

from backwave_django.models import Job, Outcome

WIRE_NAMES = ["demo.send-welcome-email", "demo.flaky-report", "demo.always-fails", "demo.sum"]
RETIRED = "demo.retired"  # no handler: the quarantined jobs' wire name
QUEUES = ["default", "emails", "reports", "bulk"]
WORKER = "fill:0:default:x"
TRACEBACK = (
    'Traceback (most recent call last):\n  File "demo/jobs.py", line 28, in always_fails\n'
    "ValueError: simulated"
)
SPREAD_SECONDS = 86_400
BATCH = 5_000

STATE_SQL = """CASE
    WHEN i % 100 < 70 THEN 'succeeded' WHEN i % 100 < 80 THEN 'scheduled'
    WHEN i % 100 < 85 THEN 'dead_lettered' WHEN i % 100 < 88 THEN 'quarantined'
    WHEN i % 100 < 93 THEN 'cancelled' ELSE 'scheduled' END"""

FILL_JOBS_POSTGRES = f"""
INSERT INTO backwave_django_job
    (wire_name, queue, payload, state, attempt, max_attempts, due_at, created_at, terminal_at, terminal_cause,
     cancel_requested)
SELECT
    CASE WHEN state = 'quarantined' THEN %(retired)s ELSE (%(wire_names)s::text[])[1 + i %% 4] END,
    (%(queues)s::text[])[1 + (i / 7) %% 4],
    '{{"n": ' || i || '}}',
    state,
    CASE state WHEN 'dead_lettered' THEN 3 WHEN 'succeeded' THEN 1 ELSE 0 END,
    3,
    at + CASE WHEN i %% 100 >= 93 THEN interval '1 day' ELSE interval '0' END,
    at,
    CASE WHEN state IN ('succeeded', 'cancelled', 'dead_lettered', 'quarantined') THEN at END,
    CASE state WHEN 'dead_lettered' THEN 'ValueError: simulated'
        WHEN 'quarantined' THEN 'no handler is registered for ' || %(retired)s
        WHEN 'cancelled' THEN 'cancelled by backwave_fill' ELSE '' END,
    false
FROM (
    SELECT i, {STATE_SQL.replace("%", "%%")} AS state,
        %(now)s::timestamptz - make_interval(secs => (i * 7919) %% {SPREAD_SECONDS}) AS at
    FROM generate_series(1::bigint, %(count)s::bigint) AS i
) AS g
"""

FILL_OUTCOMES_POSTGRES = """
INSERT INTO backwave_django_outcome (job_id, attempt, worker, kind, state_after, message, detail, recorded_at)
SELECT id, attempt, %(worker)s, 'failed', 'dead_lettered', 'ValueError: simulated', %(traceback)s, terminal_at
FROM backwave_django_job WHERE state = 'dead_lettered' AND id > %(after)s
"""


def _state(i: int) -> str:
    bucket = i % 100
    for limit, state in ((70, "succeeded"), (80, "scheduled"), (85, "dead_lettered"), (88, "quarantined")):
        if bucket < limit:
            return state
    return "cancelled" if bucket < 93 else "scheduled"


def _job(i: int, now: datetime) -> Job:
    state = _state(i)
    at = now - timedelta(seconds=(i * 7919) % SPREAD_SECONDS)
    terminal = state != "scheduled"
    causes = {
        "dead_lettered": "ValueError: simulated",
        "quarantined": f"no handler is registered for {RETIRED}",
    }
    return Job(
        wire_name=RETIRED if state == "quarantined" else WIRE_NAMES[i % 4],
        queue=QUEUES[(i // 7) % 4],
        payload=f'{{"n": {i}}}',
        state=state,
        attempt={"dead_lettered": 3, "succeeded": 1}.get(state, 0),
        max_attempts=3,
        due_at=at + timedelta(days=1) if i % 100 >= 93 else at,
        created_at=at,
        terminal_at=at if terminal else None,
        terminal_cause=causes.get(state, ""),
    )


class Command(BaseCommand):
    help = "Bulk-insert N mixed-state jobs (default 1,000,000) with a failed outcome for each dead letter."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, default=1_000_000, help="How many jobs (default 1,000,000).")

    def handle(self, *args: Any, **options: Any) -> None:
        count, now, started = options["count"], timezone.now(), time.monotonic()
        after = Job.objects.order_by("-id").values_list("id", flat=True).first() or 0
        if connection.vendor == "postgresql":
            self._fill_postgres(count, now, after)
        else:
            self._fill_portable(count, now, after)
        self.stdout.write(f"inserted {count:,} jobs in {time.monotonic() - started:.1f} s")

    def _fill_postgres(self, count: int, now: datetime, after: int) -> None:
        params = {"retired": RETIRED, "wire_names": WIRE_NAMES, "queues": QUEUES, "now": now, "count": count}
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(FILL_JOBS_POSTGRES, params)
            cursor.execute(FILL_OUTCOMES_POSTGRES, {"worker": WORKER, "traceback": TRACEBACK, "after": after})
        # Fresh statistics and visibility map, so index-only scans work at once (VACUUM needs autocommit).
        command = "ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE"
        with connection.cursor() as cursor:
            cursor.execute(f"{command} backwave_django_job")
            cursor.execute(f"{command} backwave_django_outcome")

    def _fill_portable(self, count: int, now: datetime, after: int) -> None:
        for start in range(1, count + 1, BATCH):
            with transaction.atomic():
                Job.objects.bulk_create([_job(i, now) for i in range(start, min(start + BATCH, count + 1))])
        dead = Job.objects.filter(state=Job.State.DEAD_LETTERED, id__gt=after)
        dead_rows = dead.values_list("id", "terminal_at")
        outcomes = [
            Outcome(
                job_id=job_id,
                attempt=3,
                worker=WORKER,
                kind=Outcome.Kind.FAILED,
                state_after=Job.State.DEAD_LETTERED,
                message="ValueError: simulated",
                detail=TRACEBACK,
                recorded_at=at,
            )
            for job_id, at in dead_rows.iterator()
        ]
        Outcome.objects.bulk_create(outcomes, batch_size=BATCH)
