"""A tiny run of the benchmark, so that it never rots (the full run is not a test)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from backwave_django.models import Job

from .helpers import worker_database_url

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_tiny_benchmark_run_measures_every_figure(capsys, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", worker_database_url())  # the worker processes use this test's database
    call_command(
        "backwave_bench", jobs=300, single_jobs=50, runs=1, latency_jobs=20, scale_rows=2000,
        pool_size=16, max_claim_batch=16, json=True,
    )  # fmt: skip
    results = json.loads(capsys.readouterr().out)
    figures = results["figures"]
    assert figures["enqueue"]["single_per_s"] > 0 and figures["enqueue"]["bulk_per_s"] > 0
    assert figures["drain"]["jobs_per_s"] > 0 and figures["drain"]["statements_per_job"] > 0
    assert 0 <= figures["latency"]["p50_ms"] <= figures["latency"]["p99_ms"] <= figures["latency"]["max_ms"]
    assert figures["scale"]["ratio"] > 0
    assert results["machine"]["cores"] >= 1 and results["machine"]["database"]
    assert not Job.objects.filter(queue__startswith="backwave-bench").exists()  # it cleans up after itself
