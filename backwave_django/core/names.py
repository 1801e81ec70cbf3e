"""Queue names and wire names: the one validator every entry point uses (``@job``, enqueue, settings, admin,
the stores).

A queue name is 1 to 128 characters of ASCII letters, digits, ``.``, ``_``, ``-`` and ``:``, starting with a
letter or a digit: it appears in logs, URLs, notification payloads and shell commands, so it is kept plain.
A wire name is freer (a dotted module path, a slug, words with spaces inside), but it is 1 to 128 characters
with no control characters, no lone surrogates and no leading or trailing space, so that every database can
store it and every log can print it.
"""

from __future__ import annotations

import re
import unicodedata

MAX_QUEUE_NAME_LENGTH = 128
MAX_WIRE_NAME_LENGTH = 128
MAX_UNIQUE_KEY_LENGTH = 255

QUEUE_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*\Z")
QUEUE_NAME_RULE = (
    f"1 to {MAX_QUEUE_NAME_LENGTH} characters of ASCII letters, digits, '.', '_', '-' and ':', "
    "starting with a letter or a digit"
)
WIRE_NAME_RULE = (
    f"1 to {MAX_WIRE_NAME_LENGTH} characters, with no control characters and no leading or trailing spaces"
)
UNIQUE_KEY_RULE = f"1 to {MAX_UNIQUE_KEY_LENGTH} characters, with no control characters"


def _shown(value: object) -> str:
    """A short, printable rendering of a rejected value for an error message (never raises)."""
    if isinstance(value, str):
        text = repr(value[:60]) + (f"... ({len(value)} characters)" if len(value) > 60 else "")
        return text
    if isinstance(value, int | float | bool) or value is None:
        text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "a huge int"
        return text
    return f"a {type(value).__name__}"


def queue_name_problem(value: object) -> str | None:
    """Why ``value`` is not a valid queue name, or None when it is one."""
    if not isinstance(value, str):
        return f"a queue name must be a str, not {type(value).__name__} ({_shown(value)})"
    if not value or len(value) > MAX_QUEUE_NAME_LENGTH or not QUEUE_NAME_PATTERN.match(value):
        return f"queue name {_shown(value)} is not valid: use {QUEUE_NAME_RULE}"
    return None


def _has_control(value: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cs") for c in value)


def wire_name_problem(value: object) -> str | None:
    """Why ``value`` is not a valid wire name, or None when it is one."""
    if not isinstance(value, str):
        return f"a wire name must be a str, not {type(value).__name__} ({_shown(value)})"
    bad = not value or len(value) > MAX_WIRE_NAME_LENGTH or value != value.strip() or _has_control(value)
    return f"wire name {_shown(value)} is not valid: use {WIRE_NAME_RULE}" if bad else None


def unique_key_problem(value: object) -> str | None:
    """Why ``value`` is not a valid unique key (``using(unique_key=...)``), or None when it is one."""
    if not isinstance(value, str):
        return f"a unique key must be a str, not {type(value).__name__} ({_shown(value)})"
    bad = not value or len(value) > MAX_UNIQUE_KEY_LENGTH or _has_control(value)
    return f"unique key {_shown(value)} is not valid: use {UNIQUE_KEY_RULE}" if bad else None


def is_queue_name(value: object) -> bool:
    return queue_name_problem(value) is None
