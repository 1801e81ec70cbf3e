"""The purge figure of ``manage.py backwave_bench``: how fast workers' maintenance purges a large history by
retention, and what that costs the jobs they drain meanwhile.

Method: ``purge_rows`` succeeded jobs (each with its Outcome on PostgreSQL) finished two days ago are written
into the run's history queue. The worker processes serve the bench queues and, in one more group, the history
queue, with a one-day retention, so their maintenance purges it in batches. While it does, the bench drains
round after round of ``jobs`` noop jobs (written into the paused queues, then resumed, timed to the last
job's ``terminal_at``; they stay until the end, as a live system's recent history would). After the history
is gone, three more rounds on the same workers are the baseline. Run it with autovacuum on, as production
servers do: without it the lease table bloats within minutes and every figure measures the bloat.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import Max
from django.utils import timezone

from ..models import Job
from ..store import get_store
from ..store.contract import JobStore
from . import harness, jobs

HISTORY_AGE = timedelta(days=2)
BASELINE_ROUNDS = 3


def drain_round(options: harness.Options, store: JobStore) -> float:
    """Drain ``options.jobs`` noop jobs on the running workers; jobs per second."""
    queues = harness.bench_queues(options)
    for queue in queues:
        store.pause_queue(queue, actor=harness.ACTOR, now=timezone.now())
    noop = jobs.register().noop
    first = None
    for index, queue in enumerate(queues):
        share = options.jobs // len(queues) + (index < options.jobs % len(queues))
        for offset in range(0, share, 5000):
            made = noop.using(queue=queue).enqueue_many([()] * min(5000, share - offset))
            first = made[0].id if first is None else min(first, made[0].id)
    started = timezone.now()
    for queue in queues:
        store.resume_queue(queue, actor=harness.ACTOR, now=started)
    harness.wait_drained(queues, options)
    ended = Job.objects.filter(queue__in=queues, id__gte=first).aggregate(t=Max("terminal_at"))["t"]
    return float(options.jobs / (ended - started).total_seconds())


def purge_while_draining(options: harness.Options) -> dict[str, Any]:
    rows = options.purge_rows
    harness.reset(options)
    harness.fill_succeeded(options, rows, age=HISTORY_AGE)
    connection.close()
    store = get_store(connection.alias)
    history = Job.objects.filter(queue=options.history_queue)
    during: list[float] = []
    after: list[float] = []
    purged_in = None
    with harness.workers(replace(options, purging=True)):
        started = time.monotonic()
        while len(after) < BASELINE_ROUNDS:
            rate = drain_round(options, store)
            (during if purged_in is None else after).append(rate)
            if purged_in is None and not history.exists():
                purged_in = time.monotonic() - started
            if time.monotonic() - started > 3600:
                raise RuntimeError("the history was not purged within an hour")
    assert purged_in is not None
    harness.reset(options)
    return {
        "rows": rows,
        "purge_seconds": purged_in,
        "rows_per_s": rows / purged_in,
        "drain_during_per_s": statistics.median(during),
        "drain_after_per_s": statistics.median(after),
        "during_runs": [round(rate) for rate in during],
        "after_runs": [round(rate) for rate in after],
    }
