"""What a dependency edge costs, at the store: enqueue and drain rates of graphs against independent jobs.

Run against a database of its own, migrated (``manage.py migrate``)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench \\
        python -m backwave_django.bench.edges

Each workload writes 10,000 jobs into queues of its own and drains them with one thread that claims up to 100
jobs and reports them succeeded, over and over, through the store (no worker process, no handler): the
figure is the store's own cost, which is where edges cost anything. Workloads:

- ``independent``: 10,000 jobs, enqueued in batches of 1,000;
- ``fan-in``: 10,000 parents, then one child waiting on all of them. One job may have at most
  ``MAX_PARENTS`` (1,000) parents, so the child waits on 10 joins of 1,000 parents each (10,011 jobs);
- ``fan-out``: one parent, then 10,000 children of it, enqueued in batches of 1,000;
- ``chain``: 10,000 jobs, each enqueued alone waiting on the one before (so its drain claims one at a time).

Every workload's jobs are deleted afterwards. Rates are jobs per second, of wall time at the client.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

JOBS = 10_000
BATCH = 1_000


def _setup() -> None:
    root = Path(os.environ.get("BACKWAVE_BENCH_ROOT") or Path(__file__).resolve().parents[2])
    sys.path[:0] = [str(root / "testproject"), str(root)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    import django

    django.setup()


def main() -> None:
    _setup()
    from django.db import connection
    from django.utils import timezone

    from backwave_django.core.records import OutcomeKind, OutcomeReport
    from backwave_django.core.retry import RetryPolicy
    from backwave_django.models import Job
    from backwave_django.store import NewJob, get_store

    store = get_store()
    retry = RetryPolicy()
    run = f"bwedge-{int(time.time())}"
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}, store {type(store).__name__}")
    print(f"load average at start: {os.getloadavg()}")

    def new(queue: str, parents: tuple[int, ...] = ()) -> NewJob:
        now = timezone.now()
        extra: dict[str, Any] = {"parents": parents} if parents else {}  # plain jobs run on older code too
        return NewJob(wire_name="bench.noop", payload="{}", queue=queue, due_at=now, max_attempts=3, **extra)

    def enqueue(jobs: list[NewJob]) -> list[int]:
        done = store.enqueue(jobs, now=timezone.now(), max_payload_bytes=65536)
        return [d.id for d in done]

    def drain(queue: str) -> int:
        worker, finished = "bench:1:edges:a", 0
        while True:
            now = timezone.now()
            claimed = store.claim(
                worker_id=worker, queues=[queue], max_jobs=100, lease_duration=timedelta(minutes=5), now=now
            )
            if not claimed:
                return finished
            reports = [
                OutcomeReport(job_id=c.id, attempt=c.attempt, kind=OutcomeKind.SUCCEEDED, max_attempts=3)
                for c in claimed
            ]
            store.report(worker_id=worker, reports=reports, retry=retry, now=timezone.now())
            finished += len(claimed)

    def independent(queue: str) -> None:
        for _ in range(JOBS // BATCH):
            enqueue([new(queue) for _ in range(BATCH)])

    def fan_in(queue: str) -> None:
        joins = []
        for _ in range(JOBS // BATCH):
            parents = tuple(enqueue([new(queue) for _ in range(BATCH)]))
            joins += enqueue([new(queue, parents)])
        enqueue([new(queue, tuple(joins))])

    def fan_out(queue: str) -> None:
        (root,) = enqueue([new(queue)])
        for _ in range(JOBS // BATCH):
            enqueue([new(queue, (root,)) for _ in range(BATCH)])

    def chain(queue: str) -> None:
        (last,) = enqueue([new(queue)])
        for _ in range(JOBS - 1):
            (last,) = enqueue([new(queue, (last,))])

    workloads: dict[str, Callable[[str], Any]] = {
        "independent": independent,
        "fan-in": fan_in,
        "fan-out": fan_out,
        "chain": chain,
    }
    only = sys.argv[1:] or list(workloads)
    print(f"{'workload':<12} {'jobs':>6} {'enqueue/s':>10} {'drain/s':>9}")
    for name in only:
        queue = f"{run}-{name}"
        started = time.perf_counter()
        workloads[name](queue)
        enqueued = time.perf_counter() - started
        count = Job.objects.filter(queue=queue).count()
        started = time.perf_counter()
        drained = drain(queue)
        draining = time.perf_counter() - started
        assert drained == count, f"{name}: drained {drained} of {count}"
        print(f"{name:<12} {count:>6} {count / enqueued:>10.0f} {drained / draining:>9.0f}", flush=True)
        with connection.cursor() as cursor:
            mine = "SELECT id FROM backwave_django_job WHERE queue = %s"
            for table, column in (("outcome", "job_id"), ("dependency", "child_id"), ("lease", "job_id")):
                cursor.execute(f"DELETE FROM backwave_django_{table} WHERE {column} IN ({mine})", [queue])
            cursor.execute("DELETE FROM backwave_django_job WHERE queue = %s", [queue])
            if connection.vendor == "postgresql":
                cursor.execute("VACUUM ANALYZE backwave_django_job")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
