"""What the executor hands the store with a batch of reports: each Attempt's own detail, and when two
Attempts of one job share a batch (a report believed lost, sent again after a new claim), the later one's."""

from __future__ import annotations

from datetime import UTC, datetime

from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.registry import Registry
from backwave_django.shell.executor import Executor
from backwave_django.store.contract import OutcomeDetail


def report(job_id: int, attempt: int) -> OutcomeReport:
    return OutcomeReport(job_id=job_id, attempt=attempt, kind=OutcomeKind.SUCCEEDED, max_attempts=5)


def test_the_later_attempts_detail_wins_whatever_the_order_of_the_batch():
    executor = Executor(Registry(), "w:1", lambda: datetime(2026, 1, 1, tzinfo=UTC), runner=lambda *a: None)  # type: ignore[arg-type]
    executor._details[1, 1] = OutcomeDetail(tags=("by:stale",))
    executor._details[1, 2] = OutcomeDetail(tags=("by:current",))
    executor._details[2, 1] = OutcomeDetail(output="7")
    for batch in ([report(1, 2), report(1, 1), report(2, 1)], [report(1, 1), report(1, 2), report(2, 1)]):
        details = executor.details_for(batch)
        assert details == {1: OutcomeDetail(tags=("by:current",)), 2: OutcomeDetail(output="7")}
