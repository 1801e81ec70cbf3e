"""Reads about queues for the operations pages: which queues exist, how deep each one is, and its settings.

Every read here is served by an index and bounded, so the pages cost the same on a thousand jobs or millions:
the queues with jobs come from a skip scan of ``backwave_job_queue_state`` on PostgreSQL, and each depth is
counted up to :data:`DEPTH_BOUND` (shown as "10,000+" beyond).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from .. import conf
from ..models import Job, Lease, QueueSettings

DEPTH_BOUND = 10_000

#: Distinct queues by hopping through the (queue, state) index: one probe per queue, not one row per job.
QUEUES_WITH_JOBS_POSTGRES = """
WITH RECURSIVE q AS (
    (SELECT queue FROM backwave_django_job ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM backwave_django_job j WHERE j.queue > q.queue ORDER BY j.queue LIMIT 1)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue FROM q WHERE queue IS NOT NULL
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Depth:
    """A bounded count: exact up to the bound, else "bound+"."""

    count: int
    bounded: bool

    def __str__(self) -> str:
        return f"{DEPTH_BOUND:,}+" if self.bounded else f"{self.count:,}"


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRow:
    queue: str
    depths: dict[str, Depth]
    paused: bool
    concurrency_limit: int | None
    leased: int
    configured: bool
    has_settings: bool

    @property
    def depth_list(self) -> list[Depth]:
        return [self.depths[state] for state in Job.State.values]


def queues_with_jobs() -> list[str]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(QUEUES_WITH_JOBS_POSTGRES)
            return [row[0] for row in cursor.fetchall()]
    return list(Job.objects.order_by("queue").values_list("queue", flat=True).distinct())


def known_queues() -> list[str]:
    """Every queue the cluster serves, has settings for, or has jobs in, sorted."""
    names = conf.get().served_queues() | set(QueueSettings.objects.values_list("queue", flat=True))
    return sorted(names | set(queues_with_jobs()))


def depth(queue: str, state: str) -> Depth:
    count = Job.objects.filter(queue=queue, state=state).order_by()[: DEPTH_BOUND + 1].count()
    return Depth(count=min(count, DEPTH_BOUND), bounded=count > DEPTH_BOUND)


def queue_rows() -> list[QueueRow]:
    """One row per known queue: depth per state, settings and the jobs leased now."""
    settings = {row.queue: row for row in QueueSettings.objects.all()}
    served = conf.get().served_queues()
    rows = []
    for queue in known_queues():
        row = settings.get(queue)
        rows.append(
            QueueRow(
                queue=queue,
                depths={state: depth(queue, state) for state in Job.State.values},
                paused=bool(row and row.paused),
                concurrency_limit=row.concurrency_limit if row else None,
                leased=Lease.objects.filter(queue=queue).count(),
                configured=queue in served,
                has_settings=row is not None,
            )
        )
    return rows


def oldest_due(now: datetime) -> dict[str, datetime]:
    """Per known queue, the due time of its oldest scheduled job that is due (from the claimable index)."""
    result = {}
    for queue in known_queues():
        due = (
            Job.objects.filter(state=Job.State.SCHEDULED, queue=queue, due_at__lte=now)
            .order_by("due_at")
            .values_list("due_at", flat=True)
            .first()
        )
        if due is not None:
            result[queue] = due
    return result
