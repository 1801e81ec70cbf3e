"""A tiny run of the benchmark, so that it never rots (the full run is not a test)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from backwave_django.models import Job

from .helpers import worker_database_url

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_tiny_benchmark_run_measures_every_figure(capsys, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", worker_database_url())  # the worker processes use this test's database
    call_command(
        "backwave_bench", jobs=301, single_jobs=50, runs=1, latency_jobs=20, scale_rows=2000, purge_rows=3000,
        pool_size=16, max_claim_batch=16, groups=2, json=True,
    )  # fmt: skip
    results = json.loads(capsys.readouterr().out)
    figures = results["figures"]
    assert figures["enqueue"]["single_per_s"] > 0 and figures["enqueue"]["bulk_per_s"] > 0
    assert figures["drain"]["jobs_per_s"] > 0 and figures["drain"]["statements_per_job"] > 0
    assert figures["drain"]["worker_cpu_us_per_job"] > 0
    assert 0 <= figures["latency"]["p50_ms"] <= figures["latency"]["p99_ms"] <= figures["latency"]["max_ms"]
    stages = {stage: figures["latency"][f"{stage}_p50_ms"] for stage in ("enqueue", "hint", "claim", "start")}
    assert stages["enqueue"] > 0 and stages["start"] >= 0, stages  # every stage measured: none is NaN
    assert all(median == median for median in stages.values()), stages
    assert figures["scale"]["ratio"] > 0
    assert results["machine"]["cores"] >= 1 and results["machine"]["database"]
    assert results["settings"]["groups"] == 2
    assert not Job.objects.filter(queue__startswith="bwbench-").exists()  # it cleans up after itself


def test_the_drain_at_scale_runs_beside_the_history_it_filled_in():
    from dataclasses import replace

    from backwave_django.bench import harness
    from backwave_django.store import get_store

    options = replace(harness.Options(), jobs=20)
    harness.fill_succeeded(options, 500)
    harness.preload(options, get_store())  # each drain run starts with its own backlog, not a bare table
    assert Job.objects.filter(queue=options.history_queue).count() == 500
    assert Job.objects.filter(queue__in=harness.bench_queues(options), state="scheduled").count() == 20
    harness.reset(options)
    assert not Job.objects.exists()


def test_the_bench_refuses_a_database_that_holds_other_jobs_and_never_touches_other_queues(monkeypatch):
    from django.utils import timezone

    from backwave_django.registry import registry

    now = timezone.now()
    theirs = [
        Job.objects.create(wire_name="app.job", queue=queue, due_at=now, created_at=now)
        for queue in ("default", "backwave-bench-g2", "bwbench-someone-else-1")
    ]
    with pytest.raises(CommandError, match="holds 3 jobs the bench did not create"):
        call_command("backwave_bench", jobs=10, runs=1, only=["enqueue"], single_jobs=5)
    monkeypatch.setenv("DATABASE_URL", worker_database_url())
    call_command("backwave_bench", jobs=10, runs=1, only=["enqueue"], single_jobs=5, yes=True, json=True)
    assert sorted(Job.objects.values_list("id", flat=True)) == sorted(job.id for job in theirs)
    assert "backwave.bench.noop" in registry  # registered when it ran, not when it was imported


def test_importing_the_package_registers_no_bench_job():
    import subprocess
    import sys

    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'testproject.settings'; django.setup(); "
        "import backwave_django.bench, backwave_django.bench.harness; from backwave_django import registry; "
        "print([r.wire_name for r in registry.all() if r.wire_name.startswith('backwave.bench')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="testproject")
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        (["--groups", "0"], "argument --groups: '0' is not an int >= 1"),
        (["--pumps", "two"], "argument --pumps: 'two' is not an int >= 1"),
        (["--poll-interval", "0"], "argument --poll-interval: '0' is not a number >= 0.001"),
        (["--scale-rows", "-1"], "argument --scale-rows: '-1' is not an int >= 0"),
    ],
)
def test_a_bad_option_is_refused_before_anything_runs(argument, message):
    with pytest.raises(CommandError, match=message):
        call_command("backwave_bench", *argument)
