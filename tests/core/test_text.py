"""Stored text from handlers and errors: always storable, always bounded, and describing never raises."""

from __future__ import annotations

import pytest

from backwave_django.core.text import CUT_MARK, clean, describe

# -- clean -----------------------------------------------------------------------------------------------


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


def hostile_exception(name: str, str_behaviour) -> BaseException:
    kind = type(name, (Exception,), {"__str__": lambda self: str_behaviour()})
    return kind()


def test_describe_gives_the_type_and_the_first_line():
    assert describe(ValueError("  bad value\nmore detail")) == "ValueError: bad value"
    assert describe(ValueError()) == "ValueError"


def test_describe_names_an_exception_whose_str_raises():
    assert describe(hostile_exception("Boom", _raising(ValueError()))) == "Boom: <Boom whose str() raised>"


def test_describe_survives_a_str_subclass_whose_methods_raise():
    assert describe(hostile_exception("Odd", lambda: HostileText("odd text"))) == "Odd: odd text"
