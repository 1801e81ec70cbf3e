"""Tags: the one set of rules for the labels a job carries (``using(tags=...)``, ``context.add_tag``, the
stores, the admin's filter).

A tag is either a *label*, ``"urgent"``, or a *keyed tag*, ``("tenant", "acme")``. Both are stored as one
string: a label as itself, a keyed tag as ``key:value``. A label and a key are 1 to :data:`MAX_KEY_LENGTH`
ASCII letters, digits, ``.``, ``_`` and ``-``, starting with a letter or a digit: they never hold a ``:``, so
the first ``:`` of a stored tag always splits key from value, and a string label holding one is refused
rather than guessed at (write the pair instead). A value is freer, 1 to :data:`MAX_VALUE_LENGTH` characters,
``:`` included, but with no control characters, no lone surrogates and no leading or trailing space; it is
put in Unicode NFC form, so two spellings of the same text are one tag. Tags are case-sensitive, like queue
names. A job holds a set of tags: giving one twice is the same as giving it once.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .names import _has_control, _shown

MAX_KEY_LENGTH = 64
MAX_VALUE_LENGTH = 128
#: The longest stored tag: a key, ``:`` and a value (the column's size).
MAX_TAG_LENGTH = MAX_KEY_LENGTH + 1 + MAX_VALUE_LENGTH
#: The most tags one enqueue gives a job, and the most one Attempt adds.
MAX_TAGS_PER_JOB = 64

KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
KEY_RULE = f"1 to {MAX_KEY_LENGTH} ASCII letters, digits, '.', '_' and '-', starting with a letter or a digit"
VALUE_RULE = (
    f"1 to {MAX_VALUE_LENGTH} characters, with no control characters and no leading or trailing spaces"
)
TAG_RULE = f"a label ({KEY_RULE}) or a (key, value) pair of str, the value {VALUE_RULE}"


class TagError(ValueError):
    """A tag that breaks the rules: nothing was written."""


def _key_problem(value: str, what: str) -> str | None:
    if len(value) > MAX_KEY_LENGTH or not KEY_PATTERN.match(value):
        hint = " (for a keyed tag, give a (key, value) pair)" if what == "label" and ":" in value else ""
        return f"tag {what} {_shown(value)} is not valid: use {KEY_RULE}{hint}"
    return None


def _value_problem(value: str) -> str | None:
    bad = not value or len(value) > MAX_VALUE_LENGTH or value != value.strip() or _has_control(value)
    return f"tag value {_shown(value)} is not valid: use {VALUE_RULE}" if bad else None


def normalise(tag: object) -> str:
    """The stored form of one tag given as a label or a (key, value) pair; :class:`TagError` if it is bad."""
    if type(tag) is str:  # a plain str: a subclass could change what it compares and hashes as
        problem = _key_problem(tag, "label")
        if problem:
            raise TagError(problem)
        return tag
    if type(tag) is tuple and len(tag) == 2:
        key, value = tag
        if type(key) is not str or type(value) is not str:
            raise TagError(f"a keyed tag is a pair of str, not ({_shown(key)}, {_shown(value)})")
        problem = _key_problem(key, "key")
        if problem is None:
            if len(value) <= 4 * MAX_VALUE_LENGTH:  # a huge value is refused without normalising it first
                value = unicodedata.normalize("NFC", value)
            problem = _value_problem(value)
        if problem:
            raise TagError(problem)
        return f"{key}:{value}"
    raise TagError(f"a tag is {TAG_RULE}; got {_shown(tag)}")


def normalise_all(tags: object, *, adding_to: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The stored forms of ``tags`` (any iterable of tags but a str), with the stored tags ``adding_to``,
    sorted, each once."""
    if isinstance(tags, str | bytes) or not isinstance(tags, Iterable):
        raise TagError(f"tags must be a list of tags (each {TAG_RULE}), not {_shown(tags)}")
    found: set[str] = set(adding_to)
    for tag in tags:
        found.add(normalise(tag))
        if len(found) > MAX_TAGS_PER_JOB:
            raise TagError(f"a job takes at most {MAX_TAGS_PER_JOB} tags at a time (MAX_TAGS_PER_JOB)")
    return tuple(sorted(found))


def tag_key_problem(value: object) -> str | None:
    """Why ``value`` is not a tag key (or a label), or None when it is one."""
    if type(value) is not str:
        return f"a tag key must be a str, not {_shown(value)}"
    return _key_problem(value, "key")


def stored_tag_problem(value: object) -> str | None:
    """Why ``value`` is not a tag's stored form (what a store is given), or None when it is one."""
    if type(value) is not str:
        return f"a stored tag must be a str, not {_shown(value)}"
    key, colon, rest = value.partition(":")
    try:
        again = normalise((key, rest) if colon else key)
    except TagError as exc:
        return str(exc)
    return None if again == value else f"tag {_shown(value)} is not in its stored form (NFC)"


def split(stored: str) -> str | tuple[str, str]:
    """A stored tag as it was given: the label, or the (key, value) pair."""
    key, colon, value = stored.partition(":")
    return (key, value) if colon else key
