"""The retry policy: exponential backoff with a cap and full jitter, and the attempt ceiling."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.core.retry import MAX_ATTEMPTS_LIMIT, MAX_BACKOFF_SECONDS, RetryPolicy

NOW = datetime(2026, 1, 1, tzinfo=UTC)
EXACT = RetryPolicy(jitter=False)


def test_the_default_backoff_doubles_from_2_seconds_up_to_the_300_second_cap():
    waits = [RetryPolicy().backoff(attempt).total_seconds() for attempt in range(1, 12)]
    assert waits == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]


def test_the_default_policy_waits_about_thirteen_and_a_half_minutes_over_nine_retries():
    total = sum((RetryPolicy().backoff(attempt) for attempt in range(1, 10)), timedelta())
    assert total == timedelta(minutes=13, seconds=30)


@pytest.mark.parametrize("attempt", [0, -1])
def test_an_attempt_below_one_waits_one_second(attempt):
    assert RetryPolicy().backoff(attempt) == timedelta(seconds=1)


def test_a_huge_attempt_number_stays_at_the_cap_without_overflowing():
    assert RetryPolicy().backoff(10**6) == timedelta(seconds=300)
    longest = RetryPolicy(backoff_cap=MAX_BACKOFF_SECONDS)
    assert longest.backoff(10**6) == timedelta(days=30)  # 2.0 ** 10**6 would overflow


def test_base_and_cap_are_configurable():
    policy = RetryPolicy(backoff_base=3, backoff_cap=60)
    assert [policy.backoff(a).total_seconds() for a in range(1, 5)] == [3, 9, 27, 60]


def test_a_base_of_one_retries_at_a_fixed_interval():
    policy = RetryPolicy(backoff_base=1)
    assert {policy.backoff(a) for a in range(1, 20)} == {timedelta(seconds=1)}


def test_a_zero_cap_retries_at_once():
    assert RetryPolicy(backoff_cap=0).next_attempt_at(3, 10, NOW, key=7) == NOW


@pytest.mark.parametrize(("attempt", "wait"), [(1, 2), (2, 4), (5, 32), (9, 300)])
def test_a_failure_below_the_ceiling_runs_again_after_its_backoff(attempt, wait):
    assert EXACT.next_attempt_at(attempt, 10, NOW) == NOW + timedelta(seconds=wait)


@pytest.mark.parametrize("attempt", [10, 11, 50])
def test_a_failure_at_or_past_the_ceiling_dead_letters(attempt):
    assert RetryPolicy().next_attempt_at(attempt, 10, NOW) is None


def test_the_ceiling_is_the_one_passed_in_not_the_policy_default():
    policy = RetryPolicy(max_attempts=10, jitter=False)
    assert policy.next_attempt_at(3, 3, NOW) is None
    assert policy.next_attempt_at(10, 12, NOW) == NOW + timedelta(seconds=300)


def test_a_single_attempt_job_never_retries():
    assert RetryPolicy().next_attempt_at(1, 1, NOW) is None


def test_the_retry_time_follows_now_and_keeps_its_zone():
    later = NOW + timedelta(days=400)
    assert EXACT.next_attempt_at(1, 10, later) == later + timedelta(seconds=2)
    assert RetryPolicy().next_attempt_at(1, 10, later, key=3).tzinfo is UTC


def test_the_default_ceiling_is_ten_attempts():
    assert RetryPolicy().max_attempts == 10


BAD_BASE = "backoff_base must be a number from 1 to 1000"
BAD_CAP = "backoff_cap must be from 0 to 2592000 s"
BAD_ATTEMPTS = f"max_attempts must be 1 to {MAX_ATTEMPTS_LIMIT}"


@pytest.mark.parametrize(
    ("dials", "message"),
    [
        pytest.param({"max_attempts": 0}, f"{BAD_ATTEMPTS}, got 0", id="no attempts"),
        pytest.param({"max_attempts": -5}, f"{BAD_ATTEMPTS}, got -5", id="negative attempts"),
        pytest.param({"max_attempts": 2**40}, BAD_ATTEMPTS, id="attempts past 32 bits"),
        pytest.param({"backoff_base": 0.5}, BAD_BASE, id="shrinking base"),
        pytest.param({"backoff_base": float("nan")}, BAD_BASE, id="NaN base"),
        pytest.param({"backoff_base": float("inf")}, BAD_BASE, id="infinite base"),
        pytest.param({"backoff_base": 1e6}, BAD_BASE, id="huge base"),
        pytest.param({"backoff_cap": -1}, BAD_CAP, id="negative cap"),
        pytest.param({"backoff_cap": MAX_BACKOFF_SECONDS + 1}, BAD_CAP, id="cap a second past 30 days"),
        pytest.param({"backoff_cap": 1e12}, BAD_CAP, id="cap of 1e12 seconds"),
        pytest.param({"backoff_cap": float("inf")}, BAD_CAP, id="infinite cap"),
        pytest.param({"backoff_cap": float("nan")}, BAD_CAP, id="NaN cap"),
    ],
)
def test_a_bad_policy_is_rejected(dials, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        RetryPolicy(**dials)


def test_full_jitter_waits_between_zero_and_the_backoff():
    policy = RetryPolicy()
    waits = [policy.delay(3, key) for key in range(2000)]
    assert all(timedelta(0) <= wait <= timedelta(seconds=8) for wait in waits)
    assert min(waits) < timedelta(seconds=1) and max(waits) > timedelta(seconds=7)


def test_jobs_that_failed_together_retry_apart():
    policy = RetryPolicy()
    retries = {policy.next_attempt_at(1, 10, NOW, key=job_id) for job_id in range(100)}
    assert len(retries) == 100


def test_jitter_is_a_pure_function_of_the_job_and_the_attempt():
    policy = RetryPolicy()
    assert policy.delay(4, 42) == policy.delay(4, 42)
    assert policy.delay(4, 42) != policy.delay(5, 42)


def test_the_longest_backoff_is_thirty_days():
    assert MAX_BACKOFF_SECONDS == 30 * 24 * 3600 == 2592000


@pytest.mark.parametrize("cap", [0, 1, MAX_BACKOFF_SECONDS], ids=["zero", "one second", "thirty days"])
def test_a_cap_within_bounds_is_accepted(cap):
    assert RetryPolicy(backoff_cap=cap).backoff_cap == cap


def test_a_policy_is_a_frozen_value():
    policy = RetryPolicy()
    assert policy == RetryPolicy(max_attempts=10, backoff_base=2.0, backoff_cap=300.0, jitter=True)
    with pytest.raises(AttributeError):
        policy.max_attempts = 3  # type: ignore[misc]
