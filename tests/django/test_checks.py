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
        ({"GROUPS": [("g", {})]}, ["backwave.E003"]),
        ({"GROUPS": {"g": "default"}}, ["backwave.E018"]),
        ({"GROUPS": {"": {}}}, ["backwave.E017"]),
        ({"GROUPS": {"my group": {}}}, ["backwave.E017"]),
        ({"GROUPS": {"g": {"QUEUES": ["default"], "POOLSIZE": 3}}}, ["backwave.E004"]),
        ({"GROUPS": {"g": {"QUEUES": "default"}}}, ["backwave.E005"]),
        ({"GROUPS": {"g": {"QUEUES": []}}}, ["backwave.E005"]),
        ({"GROUPS": {"g": {"QUEUES": ["a", "a"]}}}, ["backwave.E051"]),
        ({"GROUPS": {"g": {"QUEUES": ["a b"]}}}, ["backwave.E050"]),
        ({"GROUPS": {"g": {"QUEUES": [["a"]]}}}, ["backwave.E050"]),
        ({"GROUPS": {"g": {"QUEUES": ["a"], "POLICY": "weighted"}}}, ["backwave.E005"]),
        ({"GROUPS": {"g": {"QUEUES": {"a": 0}, "POLICY": "weighted"}}}, ["backwave.E052"]),
        ({"GROUPS": {"g": {"QUEUES": {"a": 10_001}, "POLICY": "weighted"}}}, ["backwave.E052"]),
        ({"GROUPS": {"g": {"QUEUES": {"q" * 129: 1}, "POLICY": "weighted"}}}, ["backwave.E050"]),
        ({"GROUPS": {"g": {"QUEUES": ["a"], "POLICY": "random"}}}, ["backwave.E006"]),
        ({"GROUPS": {"g": {"POOL_SIZE": 0}}}, ["backwave.E007"]),
        ({"GROUPS": {"g": {"POLL_INTERVAL": "1s"}}}, ["backwave.E008"]),
        ({"GROUPS": {"g": {"LEASE_DURATION": 30, "HEARTBEAT_INTERVAL": 30}}}, ["backwave.E009"]),
        (
            {"GROUPS": {"g": {"LEASE_DURATION": 30, "HEARTBEAT_INTERVAL": dt.timedelta(minutes=1)}}},
            ["backwave.E009"],
        ),
        ({"RETRY": [("MAX_ATTEMPTS", 3)]}, ["backwave.E010"]),
        ({"RETRY": {"TRIES": 3}}, ["backwave.E053"]),
        ({"MAX_PAYLOAD_BYTES": -1}, ["backwave.E011"]),
        ({"DATABASE": "elsewhere"}, ["backwave.E012"]),
        ({"DATABASE": ["default"]}, ["backwave.E012"]),
        ({"HINTS": "yes"}, ["backwave.E013"]),
        ({"MANIFEST_PATH": 3}, ["backwave.E015"]),
        ({"PREPARED_STATEMENTS": "no"}, ["backwave.E016"]),
        ({"GROUPS": {"g": {"PUMPS": "2"}}}, ["backwave.E019"]),
        ({"GROUPS": {"g": {"MAX_PUMPS": 0}}}, ["backwave.E077"]),
        ({"GROUPS": {"g": {"MAX_PUMPS": 65}}}, ["backwave.E077"]),
        ({"GROUPS": {"g": {"PUMPS": 3, "MAX_PUMPS": 2}}}, ["backwave.E078"]),
        ({"GROUPS": {"g": {"PUMPS": 2, "MAX_PUMPS": 1}}}, ["backwave.E078"]),
        ({"GROUPS": {"g": {"MAX_CLAIM_BATCH": True}}}, ["backwave.E020"]),
        ({"GROUPS": {"g": {"MAX_OUTCOME_BATCH": 1001}}}, ["backwave.E021"]),
        ({"GROUPS": {"g": {"LEASE_DURATION": 0}}}, ["backwave.E022"]),
        ({"GROUPS": {"g": {"HEARTBEAT_INTERVAL": -1}}}, ["backwave.E023"]),
        ({"GROUPS": {"g": {"MAINTENANCE_INTERVAL": None}}}, ["backwave.E024"]),
        ({"GROUPS": {"g": {"SHUTDOWN_GRACE": dt.timedelta(days=2)}}}, ["backwave.E025"]),
        ({"GROUPS": {"g": {"TIMEOUT": 0}}}, ["backwave.E026"]),
        ({"RETRY": {"MAX_ATTEMPTS": 0}}, ["backwave.E027"]),
        ({"RETRY": {"BACKOFF_BASE": "2"}}, ["backwave.E028"]),
        ({"RETRY": {"BACKOFF_CAP": dt.timedelta(days=31)}}, ["backwave.E029"]),
        ({"RETRY": {"JITTER": "no"}}, ["backwave.E030"]),
    ],
)
def test_a_wrong_setting_is_a_check_error_with_its_id(settings, value, expected):
    assert ids(settings, value) == expected


def test_a_message_names_the_key_and_the_value_and_the_hint_says_what_to_write(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"POOL_SIZE": 0}}}
    [message] = check_settings()
    assert message.msg == "BACKWAVE['GROUPS']['g']['POOL_SIZE'] is 0, not an int from 1 to 1000."
    assert message.hint.startswith("Write an int from 1 to 1000, e.g. 'POOL_SIZE': 20 (the default).")


def test_a_duration_hint_gives_both_forms_and_the_range(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"LEASE_DURATION": 1e15}}}
    [message] = check_settings()
    where = "BACKWAVE['GROUPS']['g']['LEASE_DURATION']"
    assert message.msg == f"{where} is 1000000000000000.0, not a duration from 1 s to 7 days."
    assert message.hint.startswith(
        "Write a number of seconds from 1 to 604800 (7 days) or a datetime.timedelta in that range, "
        "e.g. 'LEASE_DURATION': 60.0 (the default)."
    )


def test_a_huge_value_is_shortened_in_the_message(settings):
    settings.BACKWAVE = {"MAX_PAYLOAD_BYTES": 10**5000, "GROUPS": {"g": {"QUEUES": ["q" * 10_000]}}}
    messages = check_settings()
    assert {m.id for m in messages} == {"backwave.E050", "backwave.E011"}
    assert all(len(m.msg) < 300 for m in messages)
    assert any("<int of 16610 bits>" in m.msg for m in messages)


def test_an_unknown_key_suggests_the_known_key_it_resembles(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"POOLSIZE": 3}}, "RETRY": {"MAX_ATTEMPT": 3}}
    hints = sorted(m.hint for m in check_settings())
    assert hints[0].startswith("Did you mean 'MAX_ATTEMPTS'?")
    assert hints[1].startswith("Did you mean 'POOL_SIZE'?")


def test_every_error_has_a_hint_that_says_what_to_write(settings):
    settings.BACKWAVE = {"GROUPS": {"g": {"POOL_SIZE": 0, "LEASE_DURATION": "x"}}, "HINTS": 1}
    messages = check_settings()
    assert len(messages) == 3 and all(m.hint.startswith(("Write", "Name", "List")) for m in messages)


def test_max_pumps_is_at_least_two_and_at_least_pumps_unless_set(settings):
    settings.BACKWAVE = {"GROUPS": {"one": {}, "four": {"PUMPS": 4}, "fixed": {"PUMPS": 3, "MAX_PUMPS": 3}}}
    groups = conf.get().groups
    assert [(g.pumps, g.max_pumps) for g in groups.values()] == [(1, 2), (4, 4), (3, 3)]


def test_no_setting_means_one_default_group_serving_the_default_queue(settings):
    del settings.BACKWAVE
    parsed = conf.get()
    assert list(parsed.groups) == ["default"]
    group = parsed.groups["default"]
    assert group.queues == ("default",)
    assert (group.pool_size, group.pumps, group.max_pumps, group.max_claim_batch) == (20, 1, 2, 32)
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


def test_each_problem_of_a_groups_queues_and_of_retry_has_a_check_id_of_its_own(settings):
    groups = {
        "shape": {"QUEUES": "default"},
        "name": {"QUEUES": ["a b"]},
        "twice": {"QUEUES": ["a", "a"]},
        "weight": {"QUEUES": {"a": 0}, "POLICY": "weighted"},
    }
    settings.BACKWAVE = {"GROUPS": groups, "RETRY": [("MAX_ATTEMPTS", 3)]}
    first = {m.id for m in check_settings()}
    settings.BACKWAVE = {"RETRY": {"TRIES": 3}}
    assert first | {m.id for m in check_settings()} == {
        "backwave.E005", "backwave.E050", "backwave.E051", "backwave.E052", "backwave.E010", "backwave.E053",
    }  # fmt: skip
