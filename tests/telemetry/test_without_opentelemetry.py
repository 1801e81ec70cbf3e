"""Without opentelemetry installed, backwave imports, enqueues and runs jobs, and never loads it: a subprocess
whose imports of ``opentelemetry`` fail as if it were not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import importlib.abc, json, sys, time

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError("No module named " + repr(name), name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    sys.path[:0] = [{root!r}, {testproject!r}]

    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)

    from backwave_django import telemetry
    from backwave_django.models import Job
    from backwave_django.shell.node import Node
    from tests import jobs

    job = jobs.noop.enqueue()
    jobs.always_fails.enqueue()
    node = Node(["default"])
    node.start()
    deadline = time.monotonic() + 20
    while Job.objects.get(id=job.id).state != "succeeded" and time.monotonic() < deadline:
        time.sleep(0.05)
    node.stop(1)
    print(json.dumps({{
        "available": telemetry.AVAILABLE,
        "state": Job.objects.get(id=job.id).state,
        "trace_context": Job.objects.get(id=job.id).trace_context,
        "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"),
    }}))
    """
)


@pytest.mark.slow
def test_backwave_imports_enqueues_and_runs_jobs_with_opentelemetry_absent(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "SQLITE_PATH": str(tmp_path / "db.sqlite3"),
        "EXTRA_APPS": "tests",
        "BACKWAVE_JSON": json.dumps({"GROUPS": {"default": {"QUEUES": ["default"], "POLL_INTERVAL": 0.05}}}),
    }
    env.pop("DATABASE_URL", None)
    code = SCRIPT.format(root=str(ROOT), testproject=str(ROOT / "testproject"))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"available": False, "state": "succeeded", "trace_context": "", "loaded": []}
