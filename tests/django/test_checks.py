"""System checks: every wrong BACKWAVE setting is an error with an id and a hint."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ImproperlyConfigured

from backwave_django import conf
from backwave_django.checks import check_settings


def ids(settings, value):
    settings.BACKWAVE = value
    return sorted({message.id for message in check_settings()})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([], ["backwave.E001"]),
        ({"GROUPZ": {}}, ["backwave.E002"]),
        ({"GROUPS": {}}, ["backwave.E003"]),
        ({"GROUPS": {"g": "default"}}, ["backwave.E003"]),
        ({"GROUPS": {"g": {"QUEUES": ["default"], "POOLSIZE": 3}}}, ["backwave.E004"]),
        ({"GROUPS": {"g": {"QUEUES": "default"}}}, ["backwave.E005"]),
        ({"GROUPS": {"g": {"QUEUES": ["a", "a"]}}}, ["backwave.E005"]),
        ({"GROUPS": {"g": {"QUEUES": ["a"], "POLICY": "weighted"}}}, ["backwave.E005"]),
        ({"GROUPS": {"g": {"QUEUES": {"a": 0}, "POLICY": "weighted"}}}, ["backwave.E005"]),
        ({"GROUPS": {"g": {"QUEUES": ["a"], "POLICY": "random"}}}, ["backwave.E006"]),
        ({"GROUPS": {"g": {"POOL_SIZE": 0}}}, ["backwave.E007"]),
        ({"GROUPS": {"g": {"PUMPS": "2"}}}, ["backwave.E007"]),
        ({"GROUPS": {"g": {"MAX_CLAIM_BATCH": True}}}, ["backwave.E007"]),
        ({"GROUPS": {"g": {"POLL_INTERVAL": "1s"}}}, ["backwave.E008"]),
        ({"GROUPS": {"g": {"LEASE_DURATION": 0}}}, ["backwave.E008"]),
        ({"GROUPS": {"g": {"LEASE_DURATION": 30, "HEARTBEAT_INTERVAL": 30}}}, ["backwave.E009"]),
        ({"RETRY": {"MAX_ATTEMPTS": 0}}, ["backwave.E010"]),
        ({"RETRY": {"TRIES": 3}}, ["backwave.E010"]),
        ({"MAX_PAYLOAD_BYTES": -1}, ["backwave.E011"]),
        ({"DATABASE": "elsewhere"}, ["backwave.E012"]),
        ({"HINTS": "yes"}, ["backwave.E013"]),
        ({"MANIFEST_PATH": 3}, ["backwave.E015"]),
        ({"PREPARED_STATEMENTS": "no"}, ["backwave.E016"]),
        ({"GROUPS": {"g": {"QUEUES": {"q" * 129: 1}, "POLICY": "weighted"}}}, ["backwave.E005"]),
        ({"RETRY": {"BACKOFF_BASE": "2"}}, ["backwave.E010"]),
    ],
)
def test_a_wrong_setting_is_a_check_error_with_its_id(settings, value, expected):
    assert ids(settings, value) == expected


def test_every_error_has_a_hint_that_says_what_to_write(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"POOL_SIZE": 0, "LEASE_DURATION": "x"}}, "HINTS": 1}
    messages = check_settings()
    assert messages and all(m.hint for m in messages)
    assert any("POOL_SIZE" in m.msg and "int >= 1" in m.hint for m in messages)


def test_no_setting_means_one_default_group_serving_the_default_queue(settings):
    del settings.BACKWAVE
    parsed = conf.get()
    assert list(parsed.groups) == ["default"]
    group = parsed.groups["default"]
    assert group.queues == ("default",)
    assert (group.pool_size, group.pumps, group.max_claim_batch) == (20, 1, 32)
    assert group.lease_duration == dt.timedelta(seconds=60)
    assert group.heartbeat_interval == dt.timedelta(seconds=20)
    assert parsed.retry.max_attempts == 10


def test_durations_accept_numbers_and_timedeltas(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"POLL_INTERVAL": 0.25, "LEASE_DURATION": dt.timedelta(minutes=2)}}}
    group = conf.get().groups["g"]
    assert group.poll_interval == dt.timedelta(seconds=0.25)
    assert group.heartbeat_interval == dt.timedelta(seconds=40)


def test_a_weighted_group_builds_a_fresh_weighted_policy(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"QUEUES": {"a": 3, "b": 1}, "POLICY": "weighted"}}}
    group = conf.get().groups["g"]
    assert group.new_policy() is not group.new_policy()
    assert group.new_policy().served_queues == ("a", "b")


def test_reading_invalid_settings_at_run_time_lists_every_problem(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"POOL_SIZE": 0}}, "HINTS": 2}
    with pytest.raises(ImproperlyConfigured, match=r"(?s)backwave.E007.*backwave.E013"):
        conf.get()


def test_a_job_on_a_queue_no_group_serves_is_a_warning(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"QUEUES": ["other"]}}}
    warnings = [m for m in check_settings() if m.id == "backwave.W001"]
    assert any("tests.add" in m.msg for m in warnings)


def test_a_zero_shutdown_grace_means_no_grace_at_all(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"SHUTDOWN_GRACE": 0}}}
    assert conf.get().groups["g"].shutdown_grace == dt.timedelta(0)


def test_autovacuum_is_checked_only_when_databases_are(db):
    from backwave_django.checks import check_autovacuum

    assert check_autovacuum(databases=None) == []
    found = check_autovacuum(databases=["default"])
    assert all(m.id == "backwave.W002" for m in found)  # whatever this server's setting, never an error
