"""The settings for running in production: the hint channel, the listener's database, debug spans and the
health endpoint's token. Each is checked with its id and parsed into ``conf``."""

from __future__ import annotations

import pytest
from django.db import connections

from backwave_django import conf
from backwave_django.checks import check_settings

from ..aliases import database_alias


def ids(settings, value):
    settings.BACKWAVE = value
    return sorted({m.id for m in check_settings() if m.id.startswith("backwave.E")})  # not W001 (jobs)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"HINT_CHANNEL": ""}, ["backwave.E060"]),
        ({"HINT_CHANNEL": "Backwave"}, ["backwave.E060"]),  # LISTEN folds it, pg_notify would not
        ({"HINT_CHANNEL": "9lives"}, ["backwave.E060"]),
        ({"HINT_CHANNEL": "back wave"}, ["backwave.E060"]),
        ({"HINT_CHANNEL": "x; DROP TABLE backwave_django_job"}, ["backwave.E060"]),
        ({"HINT_CHANNEL": "c" * 64}, ["backwave.E060"]),
        ({"HINT_CHANNEL": "caf\u00e9"}, ["backwave.E060"]),
        ({"HINT_CHANNEL": b"backwave"}, ["backwave.E060"]),
        ({"HINT_CHANNEL": None}, ["backwave.E060"]),
        ({"LISTEN_DATABASE": "nowhere"}, ["backwave.E061"]),
        ({"LISTEN_DATABASE": ["default"]}, ["backwave.E061"]),
        ({"LISTEN_DATABASE": 0}, ["backwave.E061"]),
        ({"DEBUG_SPANS": "yes"}, ["backwave.E062"]),
        ({"DEBUG_SPANS": 1}, ["backwave.E062"]),
        ({"HEALTH_TOKEN": "short"}, ["backwave.E063"]),
        ({"HEALTH_TOKEN": "has a space in it, long enough"}, ["backwave.E063"]),
        ({"HEALTH_TOKEN": "t" * 513}, ["backwave.E063"]),
        ({"HEALTH_TOKEN": "line\nbreak-0123456789"}, ["backwave.E063"]),
        ({"HEALTH_TOKEN": 1234567890123456789}, ["backwave.E063"]),
    ],
)
def test_a_wrong_production_setting_is_a_check_error_with_its_id(settings, value, expected):
    assert ids(settings, value) == expected


@pytest.mark.parametrize("channel", ["backwave", "_b", "shop_jobs_2", "c" * 63])
def test_a_channel_that_postgresql_takes_unquoted_is_accepted(settings, channel):
    assert ids(settings, {"HINT_CHANNEL": channel}) == []
    assert conf.get().hint_channel == channel


def test_the_defaults_listen_on_the_jobs_database_with_no_debug_spans_and_an_open_health_endpoint(settings):
    settings.BACKWAVE = {}
    parsed = conf.get()
    assert (parsed.hint_channel, parsed.listen_database, parsed.listen_alias) == ("backwave", None, "default")
    assert (parsed.debug_spans, parsed.health_token) == (False, None)


def test_a_listen_database_must_be_postgresql_like_the_jobs_database(settings):
    """On SQLite and MariaDB there is nothing to listen to: a second alias there is a mistake."""
    with database_alias("direct"):
        found = ids(settings, {"LISTEN_DATABASE": "direct"})
        if connections["default"].vendor == "postgresql":
            assert found == []
            assert conf.get().listen_alias == "direct"
        else:
            assert found == ["backwave.E064"]


def test_the_messages_say_what_to_write_instead(settings):
    settings.BACKWAVE = {"HINT_CHANNEL": "Back-Wave", "LISTEN_DATABASE": "nowhere"}
    messages = {message.id: message for message in check_settings()}
    assert "'Back-Wave'" in messages["backwave.E060"].msg
    assert "lower-case PostgreSQL identifier" in messages["backwave.E060"].hint
    assert "'nowhere'" in messages["backwave.E061"].msg
    assert "'default'" in messages["backwave.E061"].hint
