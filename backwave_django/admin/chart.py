"""The figures behind the admin Overview: outcomes per minute, oldest due job per queue, and a bar chart.

Succeeded per minute comes from the terminal index (succeeded jobs by ``terminal_at``), failed per minute
from the partial index on failed and expired outcomes; both are aggregated in the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count
from django.db.models.functions import TruncMinute

from ..models import Job, Outcome

MINUTES = 60
CHART_HEIGHT = 120
BAR_WIDTH = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One minute of the chart, with its geometry precomputed so that the template only prints numbers."""

    minute: datetime
    succeeded: int
    failed: int
    x: int
    succeeded_y: float
    succeeded_height: float
    failed_y: float
    failed_height: float


def _per_minute(counts: dict[datetime, int], since: datetime) -> list[int]:
    buckets = [0] * MINUTES
    for minute, count in counts.items():
        index = int((minute - since).total_seconds() // 60)
        if 0 <= index < MINUTES:
            buckets[index] += count
    return buckets


def outcomes_per_minute(now: datetime) -> tuple[datetime, list[int], list[int]]:
    """(first minute, succeeded per minute, failed per minute) over the last hour, oldest first."""
    since = now.replace(second=0, microsecond=0) - timedelta(minutes=MINUTES - 1)
    succeeded = (
        Job.objects.filter(state=Job.State.SUCCEEDED, terminal_at__gte=since)
        .annotate(minute=TruncMinute("terminal_at"))
        .order_by()
        .values_list("minute")
        .annotate(n=Count("*"))
    )
    failed = (
        Outcome.objects.filter(kind__in=[Outcome.Kind.FAILED, Outcome.Kind.EXPIRED], recorded_at__gte=since)
        .annotate(minute=TruncMinute("recorded_at"))
        .order_by()
        .values_list("minute")
        .annotate(n=Count("*"))
    )
    return since, _per_minute(dict(succeeded), since), _per_minute(dict(failed), since)


def bars(since: datetime, succeeded: list[int], failed: list[int]) -> list[Bar]:
    """Stacked bars: succeeded at the bottom, failed on top, scaled to the busiest minute."""
    peak = max([s + f for s, f in zip(succeeded, failed, strict=True)] + [1])
    result = []
    for index, (ok, bad) in enumerate(zip(succeeded, failed, strict=True)):
        ok_height = round(CHART_HEIGHT * ok / peak, 2)
        bad_height = round(CHART_HEIGHT * bad / peak, 2)
        result.append(
            Bar(
                minute=since + timedelta(minutes=index),
                succeeded=ok,
                failed=bad,
                x=index * BAR_WIDTH,
                succeeded_y=round(CHART_HEIGHT - ok_height, 2),
                succeeded_height=ok_height,
                failed_y=round(CHART_HEIGHT - ok_height - bad_height, 2),
                failed_height=bad_height,
            )
        )
    return result
