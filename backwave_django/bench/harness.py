"""The measurements of ``manage.py backwave_bench``: enqueue rate, drain rate, pickup latency, claim cost
at scale, statements per job and worker memory, measured on the real database with real worker processes.

Method: noop jobs measure the framework's own overhead (its ceiling); a 10 ms sleep is the anchor workload.
Workers are separate ``backwave_bench --worker`` processes. For the drain, the backlog is written first into a
paused queue, the workers start and report ready, and the clock starts when the queue is resumed; it stops at
the last job's ``terminal_at`` (the store's own timestamps). Each figure is the median of ``runs`` runs, after
one discarded warm-up run.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from queue import SimpleQueue
from typing import Any

from django.db import DatabaseError, connection, connections
from django.db.models import Max
from django.utils import timezone

from .. import conf
from ..models import Job, Lease, Outcome, QueueSettings
from ..registry import JobFunction
from ..shell.node import TICK
from ..store import get_store
from ..store.contract import JobStore
from . import jobs

ACTOR = "backwave_bench"
#: Every queue a run writes to starts with this and the run's own id, so it never touches another's.
QUEUE_PREFIX = "bwbench"


@dataclass(slots=True, kw_only=True)
class Options:
    jobs: int = 20_000
    single_jobs: int = 2_000
    workload: str = "noop"  # noop, sleep (10 ms) or async-sleep (50 ms on the event loop)
    processes: int = 1
    groups: int = 1
    pumps: int = 2
    pool_size: int = 256
    max_claim_batch: int = 256
    poll_interval: float = 0.05
    runs: int = 3
    latency_jobs: int = 200
    latency_spacing: float = 0.05
    scale_rows: int = 0  # 0 skips the claim-cost-at-scale figure
    purge_rows: int = 1_000_000  # finished rows for the purge figure
    purging: bool = False  # the workers also serve the history queue, purging it by retention
    tracing: bool = False  # the workers run OpenTelemetry's SDK: spans to an in-memory exporter, metrics too
    transition_receiver: bool = False  # the workers connect one job_transitioned receiver (it counts)
    figures: tuple[str, ...] = ("enqueue", "drain", "latency", "scale", "schedules", "purge")
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    @property
    def history_queue(self) -> str:
        return f"{QUEUE_PREFIX}-{self.run_id}-history"


def bench_queues(options: Options) -> list[str]:
    """One queue per worker group, so that each group drains its own share of the backlog."""
    return [f"{QUEUE_PREFIX}-{options.run_id}-{index}" for index in range(1, options.groups + 1)]


def own_queues(options: Options) -> list[str]:
    """Every queue this run writes to, and no other."""
    return [*bench_queues(options), options.history_queue]


def foreign_jobs(options: Options) -> int:
    """Jobs in the database that this run did not create (a shared or production database)."""
    return Job.objects.exclude(queue__in=own_queues(options)).order_by()[:1_000_001].count()


@dataclass(slots=True)
class Results:
    settings: dict[str, Any]
    machine: dict[str, Any]
    figures: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str)


def machine() -> dict[str, Any]:
    vendor = connection.vendor
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute("SHOW server_version")
            version = f"PostgreSQL {cursor.fetchone()[0]}"
        elif vendor == "mysql":
            cursor.execute("SELECT VERSION()")
            version = cursor.fetchone()[0]  # names MariaDB itself: 10.11.19-MariaDB-0+deb12u1
        else:
            cursor.execute("select sqlite_version()")
            version = f"SQLite {cursor.fetchone()[0]}"
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "database": version,
        "commit": commit or "unknown",
        "platform": platform.platform(),
    }


def reset(options: Options, *, keep_history: bool = False) -> None:
    """Remove this run's jobs (and their leases, outcomes and queue settings); with ``keep_history``, all but
    the finished rows the scale figure measures the drain beside. On PostgreSQL, also vacuum the tables, so
    each run starts from the state autovacuum keeps a live system in (this server may run without it), and
    checkpoint, so one figure's writes are not flushed to disk while the next figure is measured."""
    mine = bench_queues(options) if keep_history else own_queues(options)
    ids = Job.objects.filter(queue__in=mine)
    Outcome.objects.filter(job__in=ids).delete()
    Lease.objects.filter(queue__in=mine).delete()
    ids.delete()
    QueueSettings.objects.filter(queue__in=mine).delete()
    if connection.vendor == "postgresql" and connection.get_autocommit():
        with connection.cursor() as cursor:
            cursor.execute(
                "VACUUM ANALYZE backwave_django_job, backwave_django_lease, backwave_django_outcome"
            )
            with contextlib.suppress(DatabaseError):  # needs superuser or pg_checkpoint; else noisier
                cursor.execute("CHECKPOINT")


def worker_groups(options: Options) -> dict[str, dict[str, Any]]:
    """The worker's ``BACKWAVE['GROUPS']``: one group per bench queue, each with the measured settings; with
    ``purging``, one more that serves the history queue, so that its maintenance purges it."""
    groups = {
        f"bench-{index}": {
            "QUEUES": [queue],
            "PUMPS": options.pumps,
            "POOL_SIZE": options.pool_size,
            "MAX_CLAIM_BATCH": options.max_claim_batch,
            "POLL_INTERVAL": options.poll_interval,
        }
        for index, queue in enumerate(bench_queues(options), start=1)
    }
    if options.purging:
        groups["bench-history"] = {"QUEUES": [options.history_queue], "POOL_SIZE": 1}
    return groups


#: The workers' retention: purging only in the purge figure, where the history finished two days ago.
RETENTION_KEEP_ALL = {"SUCCEEDED": None, "FAILED": None}
RETENTION_PURGING = {"SUCCEEDED": 86400, "FAILED": None}


def worker_command(options: Options, *, probes: bool = False) -> tuple[list[str], dict[str, str]]:
    """``python -m django backwave_bench --worker ...`` with this process's settings module and path.
    ``probes``: the worker prints when it hears a wake-up hint and when a claim leases a job (the pickup's
    stages)."""
    from django.conf import settings

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings.SETTINGS_MODULE,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    retention = RETENTION_PURGING if options.purging else RETENTION_KEEP_ALL
    ours = conf.get()  # how this project reaches its database, whatever the bench's groups
    spec = {
        "GROUPS": worker_groups(options),
        "DATABASE": connection.alias,
        "RETENTION": retention,
        "HINT_CHANNEL": ours.hint_channel,
        "LISTEN_DATABASE": ours.listen_database,
        "PREPARED_STATEMENTS": ours.prepared_statements,
        "TRACING": options.tracing,
        "TRANSITION_RECEIVER": options.transition_receiver,
        "PROBES": probes,
    }
    return [sys.executable, "-m", "django", "backwave_bench", "--worker", json.dumps(spec)], env


@contextmanager
def workers(options: Options, *, probes: bool = False) -> Iterator[list[subprocess.Popen[str]]]:
    """Start ``options.processes`` worker processes and wait until each says it is ready."""
    command, env = worker_command(options, probes=probes)
    errors = tempfile.TemporaryFile("w+")  # noqa: SIM115  (closed in the finally below)
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=errors, text=True, bufsize=1)
        for _ in range(options.processes)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("READY"):
                errors.seek(0)
                raise RuntimeError(f"a bench worker failed to start:\n{errors.read()[-3000:]}")
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            if proc.stdout is not None:
                proc.stdout.close()
        errors.close()


def worker_stats(procs: list[subprocess.Popen[str]]) -> dict[str, float]:
    """After the workers exit: statements they ran, the CPU time they used while serving, and their peak RSS,
    from their last output line."""
    statements, rss, transitions, cpu = 0, 0, 0, 0.0
    for proc in procs:
        assert proc.stdout is not None
        for line in proc.stdout.read().splitlines():
            if line.startswith("STATS "):
                stats = json.loads(line[6:])
                statements += stats["statements"]
                rss = max(rss, stats["max_rss_kb"])
                transitions += stats.get("heard", 0)
                cpu += stats["cpu_s"]
        proc.stdout.close()
    return {
        "statements": statements, "peak_rss_mb": rss / 1024, "transitions_heard": transitions, "cpu_s": cpu
    }  # fmt: skip


def enqueue_once(options: Options) -> tuple[float, float]:
    """One run: ``single_jobs`` enqueues one at a time in autocommit, then ``jobs`` in batches of 1,000."""
    noop = jobs.register().noop.using(queue=bench_queues(options)[0])
    reset(options)
    start = time.perf_counter()
    for _ in range(options.single_jobs):
        noop.enqueue()
    single = options.single_jobs / (time.perf_counter() - start)
    reset(options)
    start = time.perf_counter()
    for offset in range(0, options.jobs, 1000):
        noop.enqueue_many([()] * min(1000, options.jobs - offset))
    bulk = options.jobs / (time.perf_counter() - start)
    reset(options)
    return single, bulk


def enqueue_rates(options: Options) -> dict[str, Any]:
    """Warm-up run (discarded), then the median of ``runs`` runs of each rate."""
    enqueue_once(Options(**{**asdict(options), "single_jobs": 200, "jobs": 2000}))
    singles, bulks = zip(*(enqueue_once(options) for _ in range(options.runs)), strict=True)
    return {
        "single_per_s": statistics.median(singles),
        "bulk_per_s": statistics.median(bulks),
        "single_runs": [round(rate) for rate in singles],
        "bulk_runs": [round(rate) for rate in bulks],
    }


def preload(options: Options, store: JobStore) -> None:
    """Write the backlog into paused queues, shared evenly between the groups' queues. The history the scale
    figure filled in stays."""
    reset(options, keep_history=True)
    queues = bench_queues(options)
    for queue in queues:
        store.pause_queue(queue, actor=ACTOR, now=timezone.now())
    registered = jobs.register()
    workloads: dict[str, tuple[JobFunction[..., Any], dict[str, Any]]] = {
        "noop": (registered.noop, {}),
        "sleep": (registered.sleep, {"ms": 10}),
        "async-sleep": (registered.async_sleep, {"ms": 50}),  # await asyncio.sleep(0.05)
    }
    handler, payload = workloads[options.workload]
    for index, queue in enumerate(queues):
        share = options.jobs // len(queues) + (index < options.jobs % len(queues))
        for offset in range(0, share, 5000):
            handler.using(queue=queue).enqueue_many([payload] * min(5000, share - offset))
    connection.close()


def drain_once(options: Options) -> dict[str, float]:
    store = get_store(connection.alias)
    preload(options, store)
    with workers(options) as procs:
        queues = bench_queues(options)
        started = timezone.now()
        for queue in queues:
            store.resume_queue(queue, actor=ACTOR, now=started)
        wait_drained(queues, options)
        finished = Job.objects.filter(queue__in=queues).aggregate(t=Max("terminal_at"))["t"]
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
        stats = worker_stats(procs)
    elapsed = (finished - started).total_seconds()
    return {
        "jobs_per_s": options.jobs / elapsed,
        "seconds": elapsed,
        "statements_per_job": stats["statements"] / options.jobs,
        "peak_rss_mb": stats["peak_rss_mb"],
        "transitions_heard_per_job": stats["transitions_heard"] / options.jobs,
        "worker_cpu_us_per_job": stats["cpu_s"] / options.jobs * 1e6,
    }


def wait_drained(queues: list[str], options: Options) -> None:
    """Until nothing is scheduled or leased in ``queues``. Both reads use an index (the claimable partial
    index, the lease table), so a table full of history does not slow the check and disturb the
    measurement."""
    scheduled = Job.objects.filter(queue__in=queues, state="scheduled")
    leased = Lease.objects.filter(queue__in=queues)
    deadline = time.monotonic() + max(600.0, options.jobs / 50)
    while scheduled.exists() or leased.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the drain did not finish in time")
        time.sleep(0.01)


def drain(options: Options) -> dict[str, float]:
    """Warm-up run (discarded), then the median of ``runs`` runs."""
    drain_once(Options(**{**asdict(options), "jobs": min(options.jobs, 2000)}))
    runs = [drain_once(options) for _ in range(options.runs)]
    keys = runs[0].keys()
    figures = {key: statistics.median(run[key] for run in runs) for key in keys}
    figures["runs"] = [round(run["jobs_per_s"]) for run in runs]  # type: ignore[assignment]
    return figures


#: Where a pickup's time goes: each stage is the time between two marks. ``call``: just before the enqueue
#: call, in the bench's process; ``commit``: the call returned (autocommit: the job is committed); ``hint``:
#: the worker's listener heard the NOTIFY (which can come before the enqueuing client hears its commit);
#: ``claim``: the claim that leased the job committed (its job_transitioned, on the Pump's thread);
#: ``start``: the handler began, in a pool thread.
PICKUP_STAGES = {
    "enqueue": ("call", "commit"),
    "hint": ("call", "hint"),
    "claim": ("hint", "claim"),
    "start": ("claim", "start"),
}


def pickup_latency(options: Options) -> dict[str, float]:
    """One job at a time into an idle worker process, ``latency_spacing`` apart: from just before the enqueue
    call to the handler's start (p50, p99, max), and the median of each of :data:`PICKUP_STAGES`."""
    reset(options)
    stamp = jobs.register().stamp.using(queue=bench_queues(options)[0])
    single = Options(**{**asdict(options), "processes": 1})
    marks: dict[int, dict[str, float]] = {}
    with workers(single, probes=True) as procs:
        output = procs[0].stdout
        assert output is not None
        lines: SimpleQueue[str] = SimpleQueue()  # read as it comes: a full pipe would stall the worker
        threading.Thread(target=_forward, args=(output, lines), daemon=True).start()
        time.sleep(0.5)  # idle: the first polls have come and gone
        for _ in range(options.latency_jobs):
            call = time.time()
            created = stamp.enqueue()
            marks[created.id] = {"call": call, "commit": time.time()}
            time.sleep(options.latency_spacing)
        hints: list[float] = []
        started = 0
        while started < options.latency_jobs:
            line = lines.get(timeout=60)
            if not line:
                raise RuntimeError("the latency worker stopped early")
            what, *rest = line.split()
            if what == "BWHINT":
                hints.append(float(rest[0]))
            elif what in ("BWCLAIM", "BWSTART"):
                marks[int(rest[0])]["claim" if what == "BWCLAIM" else "start"] = float(rest[1])
                started += what == "BWSTART"
    reset(options)
    for mark in marks.values():  # the hint a job woke the worker with: the first heard after its call began
        mark["hint"] = next((h for h in hints if h >= mark["call"]), mark.get("claim", mark["start"]))
    totals = sorted((m["start"] - m["call"]) * 1000 for m in marks.values())
    figures = {"p50_ms": _rank(totals, 0.50), "p99_ms": _rank(totals, 0.99), "max_ms": totals[-1]}
    for stage, (since, until) in PICKUP_STAGES.items():
        spans = sorted((m[until] - m[since]) * 1000 for m in marks.values() if until in m)
        figures[f"{stage}_p50_ms"] = _rank(spans, 0.50) if spans else float("nan")
    return figures


def _forward(output: Iterable[str], lines: SimpleQueue[str]) -> None:
    """Every line of a worker's output onto ``lines``, then an empty one when it ends."""
    for line in output:
        lines.put(line)
    lines.put("")


def _rank(ordered: list[float], p: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[max(0, min(len(ordered) - 1, round(p * len(ordered) + 0.5) - 1))]


def fill_succeeded(options: Options, rows: int, *, age: timedelta = timedelta(0)) -> None:
    """Bulk-fill ``rows`` finished jobs into this run's history queue, as history would leave: finished
    ``age`` ago, and on PostgreSQL each with the Outcome of its one Attempt."""
    now = timezone.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO backwave_django_job (wire_name, queue, payload, state, attempt, max_attempts, "
                "due_at, created_at, terminal_at, terminal_cause, cancel_requested, priority, trace_context) "
                "SELECT 'backwave.bench.history', %s, '{}', 'succeeded', 1, 10, "
                "%s, %s, %s, '', false, 0, '' FROM generate_series(1, %s)",
                [options.history_queue, now - age, now - age, now - age, rows],
            )
            cursor.execute(
                "INSERT INTO backwave_django_outcome (job_id, attempt, kind, state_after, worker, message, "
                "detail, recorded_at, error_type) SELECT id, 1, 'succeeded', 'succeeded', 'bench', '', '', "
                "terminal_at, '' "
                "FROM backwave_django_job WHERE queue = %s",
                [options.history_queue],
            )
            cursor.execute("ANALYZE backwave_django_job, backwave_django_outcome")
        return
    batch = [
        Job(
            wire_name="backwave.bench.history",
            queue=options.history_queue,
            state="succeeded",
            attempt=1,
            due_at=now - age,
            created_at=now - age,
            terminal_at=now - age,
        )
        for _ in range(10_000)
    ]
    for offset in range(0, rows, 10_000):
        Job.objects.bulk_create(batch[: min(10_000, rows - offset)])
        for row in batch:
            row.pk = None


def drop_history(options: Options) -> None:
    history = Job.objects.filter(queue=options.history_queue)
    Outcome.objects.filter(job__in=history).delete()
    history.delete()


def trace_in_memory() -> None:
    """OpenTelemetry's SDK as a project would set it up (batched spans, periodic metrics), exporting into
    memory: what tracing costs the worker, without a collector to send to."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


#: What the bench's job_transitioned receiver heard, by target state (a receiver as cheap as one can be).
heard: collections.Counter[str] = collections.Counter()


def connect_counting_receiver() -> None:
    """Connect one receiver to ``job_transitioned`` that counts what it hears: the signal's own cost."""
    from ..signals import job_transitioned

    def count(sender: Any, *, to_state: str, **kwargs: Any) -> None:
        heard[to_state] += 1

    job_transitioned.connect(count, weak=False, dispatch_uid="backwave.bench.count")


def connect_pickup_probes(queues: Sequence[str]) -> None:
    """Print when a wake-up hint for ``queues`` is heard (on the listener's thread) and when a claim leases a
    job (after its commit, on the Pump's thread), for the stages of the pickup latency."""
    from .. import wakeups
    from ..signals import job_transitioned

    def hint() -> None:
        jobs.say(f"BWHINT {time.time():.6f}")

    def leased(sender: Any, *, job_id: int, to_state: str, **kwargs: Any) -> None:
        if to_state == "leased":
            jobs.say(f"BWCLAIM {job_id} {time.time():.6f}")

    wakeups.subscribe(queues, hint)
    job_transitioned.connect(leased, weak=False, dispatch_uid="backwave.bench.probes")


def _cpu_seconds() -> float:
    """The CPU time this process has used, user and system, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_worker(spec: dict[str, Any]) -> None:
    """The ``--worker`` mode: one process running the bench groups until SIGTERM, counting statements. Its
    settings are passed to the Node, never written into ``settings.BACKWAVE``."""
    import signal

    from ..shell.node import Node

    jobs.register()
    keys = ("GROUPS", "DATABASE", "RETENTION", "HINT_CHANNEL", "LISTEN_DATABASE", "PREPARED_STATEMENTS")
    settings = conf.parse({**{key: spec[key] for key in keys}, "HINTS": True})
    if spec["TRACING"]:
        trace_in_memory()
    if spec.get("TRANSITION_RECEIVER"):
        connect_counting_receiver()
    statements = 0
    lock = threading.Lock()

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal statements
        with lock:
            statements += 1
        return execute(sql, params, many, context)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    original = connections.create_connection

    def instrumented(alias: str) -> Any:
        wrapper = original(alias)
        wrapper.execute_wrappers.append(count)
        return wrapper

    connections.create_connection = instrumented  # type: ignore[method-assign]
    node = Node(list(settings.groups), settings=settings)
    node.start()
    if spec.get("PROBES"):  # after the Pumps subscribed: a hint wakes them before it is printed
        connect_pickup_probes(next(iter(settings.groups.values())).queues)
    ready = _cpu_seconds()
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    while not stop.wait(TICK):
        node.adapt()  # as backwave_pump does: a backlog grows each group up to MAX_PUMPS
    node.stop(grace=10)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu = _cpu_seconds() - ready  # what serving cost, start-up left out
    stats = {"statements": statements, "max_rss_kb": rss, "heard": sum(heard.values()), "cpu_s": cpu}
    sys.stdout.write("STATS " + json.dumps(stats) + "\n")
    sys.stdout.flush()
