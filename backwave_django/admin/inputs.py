"""What a user can type into the admin, checked before it reaches the database.

Every value that comes from a URL or a form (a job id in a path, a search term, a filter value, a number) is
checked here against what the database can hold, and a refusal says what was wrong and what is expected.
Queue and wire names are checked by :mod:`backwave_django.core.names`, the project's one validator for them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from django.contrib import messages
from django.http import HttpRequest

#: Job ids are PostgreSQL bigints from an identity sequence: 1 to 2**63 - 1.
MAX_JOB_ID = 2**63 - 1
JOB_ID_RULE = f"a whole number from 1 to {MAX_JOB_ID}, in ASCII digits"

_UNSTORABLE = ("Cc", "Cs")  # control characters (NUL among them) and lone surrogates


def shown(value: str) -> str:
    """A short, printable rendering of a refused value for a message."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(value)} characters)"


def job_id_problem(text: str) -> str | None:
    """Why ``text`` is not a job id, or None when it is one."""
    digits = text.lstrip("0")
    if not text.isascii() or not text.isdigit() or len(digits) > len(str(MAX_JOB_ID)):
        return f"{shown(text)} is not a job id: use {JOB_ID_RULE}"
    if not 1 <= int(digits or "0") <= MAX_JOB_ID:
        return f"{shown(text)} is not a job id: use {JOB_ID_RULE}"
    return None


def as_job_id(text: str) -> int | None:
    """``text`` as a job id, or None when it is not one."""
    return None if job_id_problem(text) else int(text)


def choice_problem(value: str, *, what: str, choices: Iterable[str]) -> str | None:
    """Why ``value`` is not one of ``choices``, or None when it is."""
    allowed = list(choices)
    return None if value in allowed else f"{what} {shown(value)} is not one of {', '.join(allowed)}"


def text_problem(value: str, *, what: str, max_length: int) -> str | None:
    """Why ``value`` cannot be compared with a text column of ``max_length`` characters, or None."""
    if not value or len(value) > max_length:
        return f"{what} {shown(value)} is not valid: use 1 to {max_length} characters"
    if any(unicodedata.category(c) in _UNSTORABLE for c in value):
        return f"{what} {shown(value)} is not valid: use text without control characters"
    return None


def tell_once(request: HttpRequest, text: str) -> None:
    """Show ``text`` as a warning on the next page, once per request however often the admin asks."""
    told: set[str] = request.__dict__.setdefault("_backwave_told", set())
    if text not in told:
        told.add(text)
        messages.warning(request, text)
