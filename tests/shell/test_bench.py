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
        "backwave_bench", jobs=301, single_jobs=50, runs=1, latency_jobs=20, scale_rows=2000,
        pool_size=16, max_claim_batch=16, groups=2, json=True,
    )  # fmt: skip
    results = json.loads(capsys.readouterr().out)
    figures = results["figures"]
    assert figures["enqueue"]["single_per_s"] > 0 and figures["enqueue"]["bulk_per_s"] > 0
    assert figures["drain"]["jobs_per_s"] > 0 and figures["drain"]["statements_per_job"] > 0
    assert 0 <= figures["latency"]["p50_ms"] <= figures["latency"]["p99_ms"] <= figures["latency"]["max_ms"]
    assert figures["scale"]["ratio"] > 0
    assert results["machine"]["cores"] >= 1 and results["machine"]["database"]
    assert results["settings"]["groups"] == 2
    assert not Job.objects.filter(queue__startswith="backwave-bench").exists()  # it cleans up after itself


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
