"""The short torture run (PostgreSQL and MariaDB): kills, terminated connections and stale writers, with
hostile jobs mixed in and transient faults on outcome writes, then the whole audit.

It runs in hostile mode only: that mode is the plain run (the same kinds of jobs, the same faults) with more
added, and takes about as long (about 60 s here), so a second, plain run would double the time for nothing
it does not already cover."""

from __future__ import annotations

import random

import pytest
from django.core.management import call_command

from .helpers import worker_database_url

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("row_locks")]


def test_a_short_hostile_torture_run_passes_the_whole_audit(capsys, monkeypatch, tmp_path):
    """Unstorable failure text, undecodable rows, handlers hung past their timeout, and 5 % of outcome writes
    failing transiently, on top of the faults: nothing lost or doubled, no Pump halted, no job left leased,
    no success charged an Attempt, every stored text storable and bounded."""
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
        hostile=True,
    )
    out = capsys.readouterr().out
    print(out)
    assert "(hostile)" in out
    assert "0 lost, 0 double outcomes, 0 unexplained executions, 0 in the wrong state" in out
    assert "0 halted pumps, 0 left leased, 0 successes charged an attempt, 0 unbounded texts" in out
