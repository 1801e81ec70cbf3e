"""backwave.W005: backwave_pump says so when the jobs' database closes its connections after every Attempt."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import connections

from backwave_django.checks import worker_connection_problems

PG = "django.db.backends.postgresql"


def test_conn_max_age_0_gets_a_warning_that_says_what_to_set():
    (warning,) = worker_connection_problems("jobs", {"ENGINE": PG, "CONN_MAX_AGE": 0})
    assert warning.id == "backwave.W005" and warning.level == checks.WARNING
    assert "DATABASES['jobs'] has CONN_MAX_AGE 0" in warning.msg
    assert '"CONN_MAX_AGE": 60' in warning.hint and '"pool": True' in warning.hint


@pytest.mark.parametrize(
    "database",
    [
        {"ENGINE": PG},  # Django's default CONN_MAX_AGE is 0
        {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {"timeout": 20}},
        {"ENGINE": "django.db.backends.mysql", "CONN_MAX_AGE": 0, "OPTIONS": {"pool": False}},
        {"ENGINE": PG, "OPTIONS": None},
        {"ENGINE": PG, "OPTIONS": ["not", "a", "dict"]},  # Django refuses it when it connects; not us
    ],
)
def test_every_engine_left_at_conn_max_age_0_is_warned(database):
    assert [w.id for w in worker_connection_problems("default", database)] == ["backwave.W005"]


@pytest.mark.parametrize(
    "database",
    [
        {"ENGINE": PG, "CONN_MAX_AGE": 60},
        {"ENGINE": PG, "CONN_MAX_AGE": None},  # unlimited persistent connections
        {"ENGINE": PG, "OPTIONS": {"pool": True}},
        {"ENGINE": PG, "OPTIONS": {"pool": {"min_size": 2}}},
    ],
)
def test_kept_or_pooled_connections_get_no_warning(database):
    assert worker_connection_problems("default", database) == []


@pytest.mark.django_db  # on MariaDB the registered checks read the server
def test_it_is_no_registered_check_a_web_process_would_see():
    assert "backwave.W005" not in {m.id for m in checks.run_checks()}


def run_pump(settings, capsys) -> str:
    settings.BACKWAVE = {"GROUPS": {"default": {"QUEUES": ["default"], "POLL_INTERVAL": 0.05}}}
    call_command("backwave_pump", "--burst", "--grace", "0", "--burst-horizon", "0", "--no-hints")
    return capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_backwave_pump_prints_it_at_start_unless_silenced(settings, capsys, monkeypatch):
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    assert "(backwave.W005) DATABASES['default'] has CONN_MAX_AGE 0" in run_pump(settings, capsys)
    settings.SILENCED_SYSTEM_CHECKS = ["backwave.W005"]
    assert "W005" not in run_pump(settings, capsys)
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 60)
    settings.SILENCED_SYSTEM_CHECKS = []
    assert "W005" not in run_pump(settings, capsys)
