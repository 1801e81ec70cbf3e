"""Stored text, by example: always storable, always bounded, and describing an error never raises.

(Property tests for ``core.text`` are written separately; these are the plain cases.)
"""

from __future__ import annotations

import pytest

from backwave_django.core import text
from backwave_django.core.text import (
    CUT_MARK,
    MAX_DETAIL_BYTES,
    MAX_MESSAGE_BYTES,
    clean,
    describe,
    format_traceback,
)


class HostileStr:
    def __str__(self) -> str:
        raise RuntimeError("no")


class HostileError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_plain_text_is_kept_as_it_is():
    assert clean("ValueError: bad input") == "ValueError: bad input"
    assert clean("déjà vu ✓") == "déjà vu ✓"


def test_nul_characters_are_dropped_and_lone_surrogates_replaced():
    assert clean("a\x00b") == "ab"
    assert clean("a\ud800b\udfffc") == "a\ufffdb\ufffdc"


def test_text_longer_than_the_bound_is_cut_and_marked_at_the_end():
    result = clean("x" * 100, max_bytes=20)
    assert result == "x" * (20 - len(CUT_MARK)) + CUT_MARK


def test_a_traceback_keeps_its_end_when_cut():
    result = clean("early lines\n" * 10 + "the error", max_bytes=30, keep="end")
    assert result.startswith(CUT_MARK) and result.endswith("the error")
    assert len(result.encode()) <= 30


def test_text_exactly_at_the_bound_is_kept_whole():
    assert clean("x" * 20, max_bytes=20) == "x" * 20
    assert clean("é" * 10, max_bytes=20) == "é" * 10  # two bytes each


def test_a_cut_never_splits_a_character():
    result = clean("é" * 50, max_bytes=20)
    assert (
        result == "é" * 7 + CUT_MARK
    )  # 15 bytes of room hold seven two-byte characters, not seven and a half
    assert len(result.encode()) <= 20


def test_a_bound_smaller_than_the_mark_cuts_without_it():
    assert clean("x" * 100, max_bytes=3) == "xxx"


def test_messages_are_bounded_by_default():
    assert len(clean("x" * 10_000).encode()) == MAX_MESSAGE_BYTES


def test_a_value_that_is_not_a_str_is_turned_into_one():
    assert clean(42) == "42"
    assert clean(HostileStr()) == "<HostileStr whose str() raised>"


DESCRIBED = [
    pytest.param(ValueError("bad input"), "ValueError: bad input", id="type and message"),
    pytest.param(KeyError("user"), "KeyError: 'user'", id="the message as str() gives it"),
    pytest.param(
        RuntimeError("first line\nsecond line"), "RuntimeError: first line", id="the first line only"
    ),
    pytest.param(
        RuntimeError("\n  padded  \n"), "RuntimeError: padded", id="surrounding blank space dropped"
    ),
    pytest.param(TimeoutError(), "TimeoutError", id="no message: the type alone"),
    pytest.param(ValueError("   "), "ValueError", id="a blank message: the type alone"),
    pytest.param(HostileError(), "HostileError: <HostileError whose str() raised>", id="a str() that raises"),
]


@pytest.mark.parametrize(("error", "expected"), DESCRIBED)
def test_an_error_is_described_in_one_line(error, expected):
    assert describe(error) == expected


def test_a_description_is_bounded():
    assert describe(ValueError("x" * 5000), max_bytes=40) == "ValueError: " + "x" * 23 + CUT_MARK


def _raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as caught:
        return caught


def test_a_traceback_is_formatted_whole_when_it_fits():
    result = format_traceback(_raised(ValueError("bad input")))
    assert result.startswith("Traceback (most recent call last):")
    assert result.endswith("ValueError: bad input\n")


def test_a_long_traceback_keeps_its_end_where_the_error_is():
    result = format_traceback(_raised(ValueError("x" * 20_000)))
    assert result.startswith(CUT_MARK) and result.endswith("x\n")
    assert len(result.encode()) <= MAX_DETAIL_BYTES


def test_a_traceback_that_cannot_be_formatted_falls_back_to_the_description(monkeypatch):
    def broken(exc: BaseException) -> list[str]:
        raise RuntimeError("the formatter broke")

    monkeypatch.setattr(text.traceback, "format_exception", broken)
    assert format_traceback(ValueError("bad input")) == "ValueError: bad input"
