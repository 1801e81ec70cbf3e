"""backwave.W004: a project on SQLite without WAL or IMMEDIATE transactions is told what to write."""

from __future__ import annotations

import pytest
from django.core import checks
from django.db import connections

from backwave_django.checks import SQLITE_OPTIONS, check_sqlite_options, sqlite_problems

SQLITE = "django.db.backends.sqlite3"


def test_sqlite_with_no_options_gets_a_warning_that_says_exactly_what_to_add():
    (warning,) = sqlite_problems("default", {"ENGINE": SQLITE, "NAME": "db.sqlite3"})
    assert warning.id == "backwave.W004"
    assert warning.level == checks.WARNING
    assert "WAL" in warning.msg and "IMMEDIATE" in warning.msg
    for key, value in SQLITE_OPTIONS.items():
        assert repr(key) in warning.hint and repr(value) in warning.hint
    assert "CONN_MAX_AGE" in warning.hint
    assert "synchronous=NORMAL" in SQLITE_OPTIONS["init_command"]  # never OFF: the user's durability


@pytest.mark.parametrize(
    ("options", "missing", "present"),
    [
        ({"transaction_mode": "IMMEDIATE"}, "WAL", "IMMEDIATE transactions"),
        ({"init_command": "pragma JOURNAL_MODE = wal;"}, "IMMEDIATE", "WAL ("),
    ],
)
def test_each_missing_option_is_named_alone(options, missing, present):
    (warning,) = sqlite_problems("jobs", {"ENGINE": SQLITE, "OPTIONS": options})
    assert missing in warning.msg and present not in warning.msg
    assert "DATABASES['jobs']" in warning.msg


def test_the_recommended_options_and_other_databases_get_no_warning():
    assert sqlite_problems("default", {"ENGINE": SQLITE, "OPTIONS": dict(SQLITE_OPTIONS)}) == []
    assert sqlite_problems("default", {"ENGINE": "django.db.backends.postgresql"}) == []


def test_the_registered_check_reads_the_database_backwave_uses():
    expected = sqlite_problems("default", connections.settings["default"])
    assert check_sqlite_options() == expected  # the test project's SQLite options are the recommended ones
