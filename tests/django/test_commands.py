"""backwave_health and the operator functions, on the real database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

import backwave_django
from backwave_django.models import AuditRecord, Job, PumpStatus, QueueSettings

from .. import jobs


def pump_row(worker_id: str, health: str, age: float, group: str = "default", host: str = "h1") -> None:
    now = timezone.now()
    PumpStatus.objects.create(
        worker_id=worker_id, group=group, host=host, pid=1, queues="default", health=health,
        started_at=now, last_beat_at=now - timedelta(seconds=age),
    )  # fmt: skip


def test_health_passes_while_a_pump_of_each_group_beats(db, capsys):
    pump_row("h1:1:default:a", "running", 1)
    pump_row("h1:1:torture:a", "running", 1, group="torture")
    call_command("backwave_health")
    assert "default: 1 pump(s) running" in capsys.readouterr().out


@pytest.mark.parametrize(("health", "age"), [("halted", 1), ("running", 3600)])
def test_health_fails_when_a_group_is_halted_or_silent(db, health, age):
    pump_row("h1:1:default:a", health, age)
    with pytest.raises(CommandError, match="down: default"):
        call_command("backwave_health")


def test_health_can_be_limited_to_one_host(db):
    pump_row("h1:1:default:a", "running", 1, host="h1")
    call_command("backwave_health", groups=["default"], host="h1")
    with pytest.raises(CommandError):
        call_command("backwave_health", groups=["default"], host="h2")


def test_health_takes_one_group_by_name_through_call_command(db):
    pump_row("h1:1:default:a", "running", 1, host="h1")
    call_command("backwave_health", group="default", host="h1")
    with pytest.raises(CommandError, match="unknown group 'nope'"):
        call_command("backwave_health", group="nope")
    with pytest.raises(CommandError, match="argument --group: 5 is not a name"):
        call_command("backwave_health", group=5)
    with pytest.raises(CommandError, match="argument --group: an empty list names none"):
        call_command("backwave_health", group=[])


def test_health_refuses_an_unknown_group(db):
    with pytest.raises(CommandError, match="unknown group"):
        call_command("backwave_health", groups=["nope"])


def test_operator_functions_act_through_the_store_and_are_audited(db):
    job = jobs.noop.enqueue()
    assert backwave_django.cancel_job(job.id, actor="ada") == "cancelled"
    assert backwave_django.requeue_job(job.id, actor="ada") == "not_requeueable"
    backwave_django.pause_queue("default", actor="ada")
    backwave_django.set_concurrency_limit("default", 3, actor="ada")
    backwave_django.resume_queue("default", actor="ada")
    assert Job.objects.get(id=job.id).state == "cancelled"
    settings_row = QueueSettings.objects.get(queue="default")
    assert (settings_row.paused, settings_row.concurrency_limit) == (False, 3)
    assert list(AuditRecord.objects.order_by("id").values_list("action", flat=True)) == [
        "cancel",
        "pause_queue",
        "set_concurrency_limit",
        "resume_queue",
    ]


def test_importing_the_package_does_not_import_the_models():
    import subprocess
    import sys

    code = "import sys, backwave_django; print('backwave_django.models' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    )


def test_start_up_imports_what_the_first_enqueue_needs():
    """So that a web process's first enqueue does not import the stores in the middle of a request."""
    import os
    import subprocess
    import sys

    modules = ("store.django", "store.postgres", "store.sqlite_store", "telemetry")
    code = (
        "import sys, django; django.setup(); "
        f"print(all('backwave_django.' + m in sys.modules for m in {modules!r}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))}  # pytest's pythonpath too
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "True", done.stderr
