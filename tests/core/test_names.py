"""Queue names and wire names: what the one validator accepts, and what it says about the rest."""

from __future__ import annotations

import pytest

from backwave_django.core.names import (
    MAX_QUEUE_NAME_LENGTH,
    MAX_WIRE_NAME_LENGTH,
    QUEUE_NAME_RULE,
    WIRE_NAME_RULE,
    is_queue_name,
    queue_name_problem,
    unique_key_problem,
    wire_name_problem,
)

GOOD_QUEUES = ["default", "q", "7", "emails.high", "tenant-42:reports_v2", "x" * MAX_QUEUE_NAME_LENGTH]
BAD_QUEUES = [
    "",
    "-leading-dash",
    ".leading-dot",
    "has space",
    "tab\there",
    "ends-with-newline\n",
    "é",
    "slash/inside",
]


@pytest.mark.parametrize("name", GOOD_QUEUES)
def test_a_plain_ascii_queue_name_is_accepted(name):
    assert queue_name_problem(name) is None
    assert is_queue_name(name)


@pytest.mark.parametrize("name", BAD_QUEUES)
def test_a_queue_name_outside_the_rule_is_refused_with_the_rule(name):
    assert queue_name_problem(name) == f"queue name {name!r} is not valid: use {QUEUE_NAME_RULE}"
    assert not is_queue_name(name)


def test_a_queue_name_one_character_too_long_is_refused():
    assert queue_name_problem("x" * (MAX_QUEUE_NAME_LENGTH + 1)).endswith(
        f" is not valid: use {QUEUE_NAME_RULE}"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "NoneType (None)"),
        (5, "int (5)"),
        (b"default", "bytes (a bytes)"),
        pytest.param(10**5000, "int (a huge int)", id="huge-int"),
    ],
)
def test_a_queue_name_that_is_not_a_str_says_what_it_is_without_ever_raising(value, shown):
    assert queue_name_problem(value) == f"a queue name must be a str, not {shown}"
    assert not is_queue_name(value)


GOOD_WIRE_NAMES = [
    "tests.noop",
    "Send welcome email",
    "billing:invoice-v2",
    "日本語のジョブ",
    "x" * MAX_WIRE_NAME_LENGTH,
]
BAD_WIRE_NAMES = [
    "",
    " leading space",
    "trailing space ",
    "tab\tinside",
    "nul\x00inside",
    "lone \ud800 surrogate",
    "x" * (MAX_WIRE_NAME_LENGTH + 1),
]


@pytest.mark.parametrize("name", GOOD_WIRE_NAMES)
def test_a_wire_name_may_be_a_dotted_path_words_or_any_script(name):
    assert wire_name_problem(name) is None


@pytest.mark.parametrize("name", BAD_WIRE_NAMES)
def test_a_wire_name_with_control_characters_outer_spaces_or_too_long_is_refused(name):
    assert wire_name_problem(name).endswith(f"is not valid: use {WIRE_NAME_RULE}")


def test_a_wire_name_that_is_not_a_str_says_what_it_is():
    assert wire_name_problem(42) == "a wire name must be a str, not int (42)"


def test_a_long_rejected_value_is_shortened_in_the_message():
    problem = queue_name_problem("x" * 500)
    assert f"'{'x' * 60}'... (500 characters)" in problem
    assert len(problem) < 250


@pytest.mark.parametrize("key", ["invoice-42", "a", "k" * 255, "spaces are fine", "ünïcode"])
def test_a_unique_key_is_one_to_255_characters_without_control_characters(key):
    assert unique_key_problem(key) is None


@pytest.mark.parametrize("key", ["", "k" * 256, "nul\x00", "line\nbreak", "\udcff", 42, None])
def test_anything_else_is_no_unique_key_and_the_problem_says_why(key):
    problem = unique_key_problem(key)
    assert problem is not None and "unique key" in problem
