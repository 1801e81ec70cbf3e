"""Across processes: a job enqueued inside a span in this process runs, in a ``backwave_pump --burst`` worker
process, in an Attempt span linked to that span (the worker exports its spans to a file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backwave_django.models import Job

from .. import jobs
from ..shell.helpers import worker_database_url
from .exporter import SPANS_FILE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def run_worker(spans_file: Path) -> str:
    settings = {
        "GROUPS": {"default": {"QUEUES": ["default"], "POLL_INTERVAL": 0.1, "POOL_SIZE": 2}},
        "RETRY": {"BACKOFF_BASE": 1.0, "BACKOFF_CAP": 0.2},  # the failing job's second Attempt comes soon
    }
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "EXTRA_APPS": "tests",
        "BACKWAVE_JSON": json.dumps(settings),
        SPANS_FILE: str(spans_file),
    }
    command = [sys.executable, str(ROOT / "testproject" / "manage.py"), "backwave_pump", "--burst"]
    done = subprocess.run(
        [*command, "--burst-horizon", "5"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_a_job_enqueued_in_a_request_span_runs_in_another_process_in_a_span_linked_to_it(otel, tmp_path):
    with otel.tracer.start_as_current_span("POST /orders") as request:
        ok = jobs.noop.enqueue()
        failing = jobs.always_fails.enqueue()
    untraced = jobs.noop.enqueue()
    output = run_worker(tmp_path / "spans.jsonl")
    records = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()]
    attempts = {}
    for record in records:
        if record["name"].startswith("backwave.attempt "):
            attempts.setdefault(int(record["attributes"]["messaging.message.id"]), []).append(record)
    assert sorted(attempts) == sorted([ok.id, failing.id, untraced.id]), output
    ours = request.get_span_context()
    expected_link = {"trace_id": f"{ours.trace_id:032x}", "span_id": f"{ours.span_id:016x}"}
    [succeeded] = attempts[ok.id]
    assert succeeded["links"] == [expected_link]
    assert succeeded["trace_id"] != expected_link["trace_id"]  # a trace of its own, linked, not a child
    assert succeeded["parent"] is None and succeeded["kind"] == "CONSUMER"
    assert succeeded["attributes"]["backwave.outcome"] == "succeeded"
    assert [a["status"] for a in attempts[failing.id]] == ["ERROR", "ERROR"]  # both Attempts, both linked
    assert all(a["links"] == [expected_link] and "exception" in a["events"] for a in attempts[failing.id])
    assert attempts[untraced.id][0]["links"] == []
    assert Job.objects.get(id=ok.id).state == "succeeded"
