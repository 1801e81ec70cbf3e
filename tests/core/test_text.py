"""Stored text from handlers and errors: always storable, always bounded, and describing never raises."""

from __future__ import annotations

import traceback

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backwave_django.core.text import CUT_MARK, clean, describe, format_traceback

PROPERTY = settings(max_examples=150, deadline=None)

# Any code point: lone surrogates and NUL included, and the multi-byte ones that a cut could split.
anything_text = st.text(st.characters(codec=None, categories=None))
byte_bounds = st.integers(min_value=0, max_value=64) | st.integers(min_value=0, max_value=5000)


def storable_form(text: str) -> str:
    """What clean keeps of ``text`` before cutting: no NUL, each lone surrogate as U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text if c != "\x00")


def assert_storable(text: str, max_bytes: int) -> None:
    assert type(text) is str
    assert "\x00" not in text
    assert len(text.encode("utf-8")) <= max_bytes  # encoding also proves there is no lone surrogate


# -- clean -----------------------------------------------------------------------------------------------


@PROPERTY
@given(text=anything_text, max_bytes=byte_bounds, keep=st.sampled_from(["start", "end"]))
def test_clean_text_is_storable_and_within_the_bound(text, max_bytes, keep):
    assert_storable(clean(text, max_bytes, keep=keep), max_bytes)


@PROPERTY
@given(text=anything_text, max_bytes=byte_bounds)
def test_clean_keeps_the_start_whole_characters_and_as_many_as_fit(text, max_bytes):
    whole, out = storable_form(text), clean(text, max_bytes)
    if len(whole.encode()) <= max_bytes:
        assert out == whole
        return
    mark = CUT_MARK if max_bytes > len(CUT_MARK) else ""
    assert out.endswith(mark)
    kept = out[: len(out) - len(mark)]
    assert whole.startswith(kept)  # a prefix in characters: no character was split
    room = max_bytes - len(mark)
    assert len((kept + whole[len(kept)]).encode()) > room  # the next character would not have fitted


@PROPERTY
@given(text=anything_text, max_bytes=byte_bounds)
def test_clean_keeping_the_end_keeps_whole_characters_and_as_many_as_fit(text, max_bytes):
    whole, out = storable_form(text), clean(text, max_bytes, keep="end")
    if len(whole.encode()) <= max_bytes:
        assert out == whole
        return
    mark = CUT_MARK if max_bytes > len(CUT_MARK) else ""
    assert out.startswith(mark)
    kept = out[len(mark) :]
    assert whole.endswith(kept)
    room = max_bytes - len(mark)
    assert len((whole[len(whole) - len(kept) - 1] + kept).encode()) > room


@PROPERTY
@given(value=st.binary() | st.integers() | st.lists(anything_text) | st.none(), max_bytes=byte_bounds)
def test_clean_turns_any_object_into_storable_text(value, max_bytes):
    assert_storable(clean(value, max_bytes), max_bytes)


@pytest.mark.parametrize("max_bytes", [0, 1, 4, 5])
def test_a_bound_too_small_for_the_cut_mark_is_still_kept(max_bytes):
    out = clean("a long message that does not fit", max_bytes)
    assert out == "a long message"[:max_bytes]
    assert len(out.encode()) <= max_bytes


def test_a_negative_bound_keeps_nothing():
    assert clean("message", -1) == ""


def test_a_cut_never_splits_a_four_byte_character():
    assert clean("😀😀😀😀", 4 + len(CUT_MARK) + 3) == "😀" + CUT_MARK
    assert clean("😀😀😀😀", 4 + len(CUT_MARK) + 3, keep="end") == CUT_MARK + "😀"


def test_nul_is_dropped_and_a_lone_surrogate_replaced():
    assert clean("a\x00b\ud800c") == "ab\ufffdc"


# -- describe and format_traceback ---------------------------------------------------------------------------


class HostileText(str):
    """A string whose methods raise: what a hostile __str__ might return."""

    def strip(self, *args: object) -> str:
        raise RuntimeError("strip")

    def splitlines(self, *args: object) -> list[str]:
        raise RuntimeError("splitlines")

    def replace(self, *args: object) -> str:
        raise RuntimeError("replace")

    def encode(self, *args: object) -> bytes:
        raise RuntimeError("encode")


def _raising(error: BaseException):
    def behaviour() -> object:
        raise error

    return behaviour


str_behaviours = st.one_of(
    anything_text.map(lambda text: lambda: text),
    st.integers(0, 200_000).map(lambda size: lambda: "é" * size + "\nsecond line"),
    st.sampled_from([None, 42, b"bytes", ["a list"], HostileText("hostile")]).map(lambda v: lambda: v),
    st.sampled_from([ValueError("str"), RecursionError(), MemoryError(), TypeError()]).map(_raising),
)
# Python refuses a type name holding NUL or a lone surrogate; any other text will do.
type_names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1)


def hostile_exception(name: str, str_behaviour) -> BaseException:
    kind = type(name, (Exception,), {"__str__": lambda self: str_behaviour()})
    return kind()


@PROPERTY
@given(name=type_names, behaviour=str_behaviours, max_bytes=byte_bounds)
def test_describe_never_raises_and_is_storable(name, behaviour, max_bytes):
    assert_storable(describe(hostile_exception(name, behaviour), max_bytes), max_bytes)


@PROPERTY
@given(name=type_names, behaviour=str_behaviours, max_bytes=byte_bounds)
def test_format_traceback_never_raises_and_is_storable(name, behaviour, max_bytes):
    exc = hostile_exception(name, behaviour)
    try:
        raise exc from ValueError("the cause")
    except Exception as raised:
        exc = raised
    assert_storable(format_traceback(exc, max_bytes), max_bytes)


def test_describe_gives_the_type_and_the_first_line():
    assert describe(ValueError("  bad value\nmore detail")) == "ValueError: bad value"
    assert describe(ValueError()) == "ValueError"


def test_describe_names_an_exception_whose_str_raises():
    assert describe(hostile_exception("Boom", _raising(ValueError()))) == "Boom: <Boom whose str() raised>"


def test_describe_survives_a_str_subclass_whose_methods_raise():
    assert describe(hostile_exception("Odd", lambda: HostileText("odd text"))) == "Odd: odd text"


@PROPERTY
@given(message=anything_text, size=st.integers(0, 50_000), max_bytes=st.integers(200, 3000))
def test_format_traceback_keeps_the_end_where_the_final_exception_is(message, size, max_bytes):
    try:
        raise RuntimeError("x" * size + message)
    except RuntimeError as raised:
        exc = raised
    full = "".join(traceback.format_exception(exc))
    assert format_traceback(exc, max_bytes) == clean(full, max_bytes, keep="end")
    assert format_traceback(exc, max_bytes).endswith(clean(full[-10:], 100))
