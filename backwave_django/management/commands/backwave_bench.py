"""``manage.py backwave_bench``: measure enqueue rate, drain rate, pickup latency and claim cost at scale."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from ...bench import harness as bench
from ...bench import purge as purge_bench
from ...bench import schedules as schedule_bench
from ..arguments import count, count_or_zero, seconds

FIGURES = ("enqueue", "drain", "latency", "scale", "schedules", "purge")


class Command(BaseCommand):
    help = "Benchmark backwave on this database (see docs/performance.md for the method)."
    requires_system_checks: list[str] = []  # its jobs use a queue of their own that no group serves

    def add_arguments(self, parser: CommandParser) -> None:
        add = parser.add_argument
        add("--jobs", type=count, default=20_000, help="Jobs per drain run and for the bulk enqueue (20000).")
        add(
            "--single-jobs", type=count, default=2_000, help="Jobs for the one-at-a-time enqueue rate (2000)."
        )
        add(
            "--workload",
            choices=["noop", "sleep", "async-sleep"],
            default="noop",
            help="noop, a 10 ms sleep per job, or an async handler awaiting asyncio.sleep(0.05).",
        )
        add("--processes", type=count, default=1, help="Worker processes for the drain (1).")
        add("--groups", type=count, default=1, help="Worker groups per process, each its own queue (1).")
        add("--pumps", type=count, default=2, help="PUMPS per worker group (2).")
        add("--pool-size", type=count, default=256, help="POOL_SIZE per Pump (256).")
        add("--max-claim-batch", type=count, default=256, help="MAX_CLAIM_BATCH (256).")
        add("--poll-interval", type=seconds, default=0.05, help="POLL_INTERVAL in seconds (0.05).")
        add("--runs", type=count, default=3, help="Measured runs of each rate; the median is reported (3).")
        add("--latency-jobs", type=count, default=200, help="Jobs for the pickup latency (200).")
        add(
            "--scale-rows",
            type=count_or_zero,
            default=1_000_000,
            help="Succeeded rows for the claim-cost figure; 0 skips it (1000000).",
        )
        add(
            "--purge-rows",
            type=count,
            default=1_000_000,
            help="Finished rows the workers purge while draining, for the purge figure (1000000).",
        )
        add(
            "--tracing",
            action="store_true",
            help="Workers run OpenTelemetry's SDK (batched spans and metrics into memory): tracing's cost.",
        )
        add(
            "--transition-receiver",
            action="store_true",
            help="Workers connect one job_transitioned receiver (it counts): the signal's cost.",
        )
        add("--only", action="append", choices=FIGURES, help="Measure only these figures (repeatable).")
        add("--json", action="store_true", help="Print the results as JSON only.")
        add(
            "--yes",
            action="store_true",
            help="Run even though the database holds jobs the bench did not create (it writes and deletes "
            "only rows of its own queues, but inserts up to --scale-rows rows and vacuums the tables).",
        )
        add("--worker", metavar="SPEC_JSON", help=argparse_suppress())

    def handle(self, *args: Any, **options: Any) -> None:
        if options["worker"]:
            bench.run_worker(json.loads(options["worker"]))
            return
        # Every option named like an Options field (--pool-size is pool_size) sets it; --only sets figures.
        given = {f.name: options[f.name] for f in dataclasses.fields(bench.Options) if f.name in options}
        opts = bench.Options(**given, figures=tuple(options["only"] or FIGURES))
        if opts.tracing and importlib.util.find_spec("opentelemetry.sdk") is None:
            raise CommandError("--tracing needs OpenTelemetry's SDK: pip install opentelemetry-sdk")
        on_database = set(opts.figures) != {"schedules"}  # the schedule figure needs no table
        others = bench.foreign_jobs(opts) if on_database else 0
        if others and not options["yes"]:
            raise CommandError(
                f"the database {connection.settings_dict['NAME']!r} holds {others:,} jobs the bench did not "
                "create. The bench writes and deletes only rows in queues of its own "
                f"({bench.QUEUE_PREFIX}-<run id>-...), but it inserts up to --scale-rows rows, vacuums and "
                "loads the tables, and would disturb a live system. Point DATABASE_URL at a database of its "
                "own, or pass --yes."
            )
        results = bench.Results(settings=dataclasses.asdict(opts), machine=bench.machine())
        say = (lambda line: None) if options["json"] else self.stdout.write
        say(f"backwave_bench on {results.machine['database']}, {results.machine['cores']} cores, "
            f"commit {results.machine['commit']}")  # fmt: skip
        say(f"settings: {json.dumps(results.settings)}")
        if "enqueue" in opts.figures:
            figure = results.figures["enqueue"] = bench.enqueue_rates(opts)
            say(
                f"enqueue: {figure['single_per_s']:,.0f} jobs/s one at a time "
                f"(runs {figure['single_runs']}); "
                f"{figure['bulk_per_s']:,.0f} jobs/s bulk (runs {figure['bulk_runs']})"
            )
        if "drain" in opts.figures or "scale" in opts.figures:
            figure = results.figures["drain"] = bench.drain(opts)
            shape = (
                f"{opts.processes} process(es) x {opts.groups} group(s) x {opts.pumps} pump(s) "
                f"x pool {opts.pool_size}{', tracing on' if opts.tracing else ''}"
                f"{', one job_transitioned receiver' if opts.transition_receiver else ''}"
            )
            say(
                f"drain ({opts.workload}, {shape}): {figure['jobs_per_s']:,.0f} jobs/s "
                f"(runs {figure['runs']}); "
                f"{figure['statements_per_job']:.2f} statements/job; "
                f"{figure['transitions_heard_per_job']:.2f} transitions heard/job; "
                f"worker CPU {figure['worker_cpu_us_per_job']:.0f} µs/job; "
                f"worker peak RSS {figure['peak_rss_mb']:.0f} MB"
            )
        if "latency" in opts.figures:
            figure = results.figures["latency"] = bench.pickup_latency(opts)
            say(
                "pickup latency (idle, hints on, from just before the enqueue call in this process to the "
                f"handler's start in the worker's): p50 {figure['p50_ms']:.1f} ms, "
                f"p99 {figure['p99_ms']:.1f} ms, max {figure['max_ms']:.1f} ms; medians: "
                + ", ".join(
                    f"{since}→{until} {figure[f'{stage}_p50_ms']:.2f} ms"
                    for stage, (since, until) in bench.PICKUP_STAGES.items()
                )
            )
        if "scale" in opts.figures and opts.scale_rows:
            bench.fill_succeeded(opts, opts.scale_rows)
            try:
                figure = results.figures["scale"] = bench.drain(opts)
            finally:
                bench.drop_history(opts)
            ratio = figure["jobs_per_s"] / results.figures["drain"]["jobs_per_s"]
            figure["ratio"] = ratio
            say(
                f"claim cost at scale ({opts.scale_rows:,} succeeded rows): "
                f"{figure['jobs_per_s']:,.0f} jobs/s, {ratio:.2f}x the empty-table rate"
            )
        if "schedules" in opts.figures:
            figure = results.figures["schedules"] = schedule_bench.schedule_rates(opts.runs)
            say(
                f"schedules (test pump, memory store): a year of an hourly schedule, "
                f"{figure['jobs']:,} jobs, in {figure['seconds']:.2f} s (runs {figure['runs']})"
            )
        if "purge" in opts.figures:
            figure = results.figures["purge"] = purge_bench.purge_while_draining(opts)
            say(
                f"purge by retention ({figure['rows']:,} finished jobs with outcomes): "
                f"{figure['rows_per_s']:,.0f} rows/s ({figure['purge_seconds']:.1f} s); drain meanwhile "
                f"{figure['drain_during_per_s']:,.0f} jobs/s (runs {figure['during_runs']}), after "
                f"{figure['drain_after_per_s']:,.0f} jobs/s (runs {figure['after_runs']})"
            )
        if on_database:
            bench.reset(opts)
        connection.close()
        if options["json"]:
            self.stdout.write(results.as_json())


def argparse_suppress() -> str:
    return argparse.SUPPRESS
