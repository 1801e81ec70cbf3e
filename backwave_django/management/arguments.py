"""argparse types shared by the management commands: each refuses what the command cannot use (a word, NaN,
infinity, a value out of range) with a message that names the value and what was expected, before anything
runs."""

from __future__ import annotations

import argparse
import math

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
