"""The short torture run (PostgreSQL and MariaDB): kills, terminated connections and stale writers, then the
audit."""

from __future__ import annotations

import random

import pytest
from django.core.management import call_command

from .helpers import worker_database_url

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("row_locks")]


def test_a_short_torture_run_loses_nothing_and_applies_every_outcome_once(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", worker_database_url())
    seed = random.randrange(2**32)
    call_command(
        "backwave_torture",
        jobs=1500,
        workers=3,
        duration=25,
        seed=seed,
        logs=str(tmp_path),
        drain_timeout=120,
    )
    out = capsys.readouterr().out
    print(out)  # the summary and the seed, in the CI log
    assert "0 lost, 0 double outcomes, 0 unexplained executions, 0 in the wrong state" in out
