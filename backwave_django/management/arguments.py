"""argparse types shared by the management commands: each refuses what the command cannot use (a word, NaN,
infinity, a value out of range) with a message that names the value and what was expected, before anything
runs."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from ..conf_kinds import number, shown


def _number(text: str, kind: type[int] | type[float], least: float, most: float = math.inf) -> float:
    try:
        value: float = kind(text)
    except (TypeError, ValueError):  # not a number, or an int past Python's digit limit
        value = math.nan
    if not (math.isfinite(value) and least <= value <= most):
        what = "an int" if kind is int else "a number"
        bounds = f">= {number(least)}" if most == math.inf else f"from {number(least)} to {number(most)}"
        raise argparse.ArgumentTypeError(f"{shown(text)} is not {what} {bounds}")
    return value


def count(text: str) -> int:
    return int(_number(text, int, 1))


def count_or_zero(text: str) -> int:
    return int(_number(text, int, 0))


def seconds(text: str) -> float:
    return _number(text, float, 0.001)


def seconds_between(least: float, most: float) -> Callable[[str], float]:
    """A type for a number of seconds from ``least`` to ``most``."""

    def parse(text: str) -> float:
        return _number(text, float, least, most)

    return parse


def given(options: dict[str, Any], dest: str, parse: Callable[[str], float]) -> float | None:
    """``options[dest]`` checked by ``parse``: a value passed to ``call_command()`` as a keyword skips
    argparse, so the command checks it again, and says so as argparse would."""
    value = options[dest]
    if value is None:
        return None
    try:
        return parse(str(value))
    except argparse.ArgumentTypeError as exc:
        raise CommandError(f"argument --{dest.replace('_', '-')}: {exc}") from None


def repeated(
    options: dict[str, Any], dest: str, flag: str, parse: Callable[[str], Any] | None = None
) -> list[Any]:
    """A repeatable option's values (``[]`` when it was not given). ``call_command()`` passes a keyword as
    it is given, past argparse: one value as a string (``group="default"``), which would otherwise be read
    one letter at a time, and unchecked, so each value is checked again (a string, then ``parse``), as
    argparse would have. An empty list is refused: it would otherwise mean "every one"."""
    values = options[dest]
    if values is None:
        return []
    values = list(values) if isinstance(values, list | tuple) else [values]
    if not values:
        raise CommandError(f"argument {flag}: an empty list names none; leave {flag} out to mean every one")
    for value in values:
        if not isinstance(value, str):
            raise CommandError(f"argument {flag}: {value!r} is not a name (a str)")
    if parse is None:
        return values
    try:
        return [parse(value) for value in values]
    except argparse.ArgumentTypeError as exc:
        raise CommandError(f"argument {flag}: {exc}") from None
