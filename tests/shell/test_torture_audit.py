"""The torture run's text audit: it finds stored text that a database would refuse or that passed its bound,
in job causes, outcome messages and tracebacks, and Pump health details, on every database."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone
from torture.management.commands.backwave_torture import Command, storable

from backwave_django.core.text import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES
from backwave_django.models import Job, Outcome, PumpStatus
from backwave_django.store.contract import MAX_HEALTH_DETAIL_BYTES


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("ValueError: unknown sku 42", True),
        ("é" * (MAX_MESSAGE_BYTES // 2), True),  # two bytes each: exactly the bound
        ("é" * (MAX_MESSAGE_BYTES // 2) + "x", False),  # one byte over, though fewer characters than bytes
        ("unknown sku \x00", False),
        ("a lone surrogate \udcff", False),
        ("", True),
    ],
    ids=["plain", "at the byte bound", "one byte over", "a NUL", "a lone surrogate", "empty"],
)
def test_storable_text_has_no_nul_no_lone_surrogate_and_fits_its_bound_in_bytes(text, ok):
    assert storable(text, MAX_MESSAGE_BYTES) is ok


@pytest.mark.django_db
def test_the_audit_names_each_unbounded_text_with_where_it_was_found():
    now = timezone.now()
    nul = "" if connection.vendor == "postgresql" else "\x00"  # PostgreSQL cannot even store it
    long_cause = Job.objects.create(
        wire_name="torture.fast", queue="torture", payload="{}", due_at=now, created_at=now,
        terminal_cause="x" * (MAX_MESSAGE_BYTES + 1) + nul,
    )  # fmt: skip
    fine = Job.objects.create(
        wire_name="torture.fast", queue="torture", payload="{}", due_at=now, created_at=now,
        terminal_cause="ValueError: fine",
    )  # fmt: skip
    for message, detail in [("m" * (MAX_MESSAGE_BYTES + 1), ""), ("ok", "d" * (MAX_DETAIL_BYTES + 1))]:
        Outcome.objects.create(
            job=fine, attempt=1, kind="failed", state_after="scheduled", message=message, detail=detail,
            recorded_at=now,
        )  # fmt: skip
    PumpStatus.objects.create(
        worker_id="w:1:torture:0", group="torture", host="w", pid=1, started_at=now, last_beat_at=now,
        detail="h" * (MAX_HEALTH_DETAIL_BYTES + 1),
    )  # fmt: skip
    found = Command().unbounded_texts([long_cause.id, fine.id])
    assert found == [
        ("terminal_cause", long_cause.id), ("message", fine.id), ("detail", fine.id),
        ("pump detail", "w:1:torture:0"),
    ]  # fmt: skip


@pytest.mark.django_db
def test_the_audit_finds_a_nul_where_the_database_keeps_it():
    if connection.vendor == "postgresql":
        pytest.skip("PostgreSQL refuses NUL in text: it can never be stored there")
    now = timezone.now()
    job = Job.objects.create(
        wire_name="torture.fast", queue="torture", payload="{}", due_at=now, created_at=now,
        terminal_cause="ValueError: unknown sku \x00",
    )  # fmt: skip
    Outcome.objects.create(
        job=job, attempt=1, kind="failed", state_after="dead_lettered", message="\x00", detail="a\x00b",
        recorded_at=now,
    )  # fmt: skip
    found = Command().unbounded_texts([job.id])
    assert found == [("terminal_cause", job.id), ("message", job.id), ("detail", job.id)]
