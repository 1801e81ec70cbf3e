"""Payload encoding: job arguments to JSON text and back.

Plain JSON values pass through. Dates, times, datetimes, timedeltas, UUIDs, Decimals, tuples and sets are
written as tagged objects (``{"$bw": "datetime", "v": "..."}``) so they decode to the same type. Anything else
(a model instance, a file, an arbitrary object) is refused at enqueue with an error naming the argument.

Whatever :func:`encode` returns can be stored and read back: it is valid UTF-8 without a raw NUL (PostgreSQL
``text`` and SQLite both hold it), nests at most :data:`MAX_DEPTH` containers deep and holds no integer of
more than :data:`MAX_INT_DIGITS` digits, so every worker can parse it back. An argument that breaks one of
these rules is refused with :class:`PayloadError` naming it and the problem.

:func:`decode` reads arbitrary text: rows may come from another service or an older deploy. Whatever goes
wrong becomes :class:`PayloadDecodeError`, whose message says what and where but never shows the value.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
import re
import sys
import uuid
from collections.abc import Callable, Mapping
from typing import Any

TAG = "$bw"
#: Containers (lists, dicts, tuples, sets) an argument may nest inside one another.
MAX_DEPTH = 100
#: Decimal digits an integer may have: below Python's default limit (4300) for reading ints from text.
MAX_INT_DIGITS = 4000

# An int this short (at most 603 digits) converts to and from text under any limit Python allows (>= 640).
_ALWAYS_READABLE_BITS = 2000
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_HINT = (
    "which is not valid Unicode text, so no database can store it (it usually comes from bytes decoded with "
    "errors='surrogateescape'; decode them with errors='replace' instead)"
)


class PayloadError(TypeError):
    """An argument cannot be stored as a job payload. The message names the argument and what it was."""


class PayloadDecodeError(ValueError):
    """A stored payload no longer decodes: the job is unroutable. The message never shows the value."""


# -- encoding ------------------------------------------------------------------------------------------------


class _Refused(Exception):
    """An argument's problem, found deep inside it: each container adds its step on the way out."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.steps: list[str] = []

    def at(self, step: str) -> _Refused:
        self.steps.append(step)
        return self

    def message(self, name: str) -> str:
        return f"{_path(f'argument {name!r}', self.steps[::-1])} {self.problem}"


#: The one encoder of payloads and return values: compact, UTF-8 kept as is. Made once (``json.dumps`` with
#: options builds a new encoder per call, a fifth of encoding a small payload).
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def encode(arguments: Mapping[str, Any]) -> str:
    """JSON text for ``arguments`` (parameter name to value). Raises PayloadError naming the argument."""
    encoded = {}
    for name, value in arguments.items():
        if not isinstance(name, str):
            raise PayloadError(f"argument name {_safe_repr(name)} is not a string")
        try:
            _check_key(name)
            encoded[name] = _encode(value, 0)
        except _Refused as exc:
            raise PayloadError(exc.message(name)) from None
    return _JSON.encode(encoded)


def encode_value(value: Any, what: str = "the return value") -> str:
    """JSON text for one value (a handler's return value), by the same rules as the arguments. Raises
    PayloadError naming ``what`` and where inside it the problem is."""
    try:
        return _JSON.encode(_encode(value, 0))
    except _Refused as exc:
        raise PayloadError(_path(what, exc.steps[::-1]) + f" {exc.problem}") from None


def _encode(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return value if value.isascii() else _storable_text(value, "is a string that")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= _ALWAYS_READABLE_BITS else _readable_int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Refused(f"is {value!r}, which JSON cannot represent")
        return value
    if isinstance(value, dict | list):  # the common containers first: the tagged types are rarer
        return _encode_container(value, depth)
    for kind, tag, encode_scalar in _ENCODERS:
        if isinstance(value, kind):
            return {TAG: tag, "v": encode_scalar(value)}
    if isinstance(value, tuple | set | frozenset | Mapping):
        return _encode_container(value, depth)
    raise _Refused(
        f"is a {type(value).__module__}.{type(value).__qualname__}, which cannot be stored in a job "
        "payload; pass plain data instead (for a model instance, pass its primary key and load it in the job)"
    )


def _encode_container(value: Any, depth: int) -> Any:
    if depth >= MAX_DEPTH:
        raise _Refused(
            f"is nested deeper than {MAX_DEPTH} containers (lists, dicts, tuples, sets), or contains "
            "itself; flatten it, or pass the deep part as JSON text"
        )
    depth += 1
    if isinstance(value, list):
        return _encode_items(value, depth)
    if isinstance(value, Mapping):
        return _encode_mapping(value, depth)
    items = _encode_items(value, depth)
    if isinstance(value, tuple):
        return {TAG: "tuple", "v": items}
    tag = "frozenset" if isinstance(value, frozenset) else "set"
    return {TAG: tag, "v": sorted(items, key=repr)}  # one text whatever the set's order


def _encode_items(items: Any, depth: int) -> list[Any]:
    out: list[Any] = []
    for index, item in enumerate(items):
        try:
            out.append(_encode(item, depth))
        except _Refused as exc:
            raise exc.at(f"[{index}]") from None
    return out


def _encode_mapping(value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
    out = {}
    for key, item in value.items():
        if not (isinstance(key, str) and key.isascii()) or key == TAG:
            _check_key(key)
        try:
            out[key] = _encode(item, depth)
        except _Refused as exc:
            raise exc.at(f"[{_brief(key)}]") from None
    return out


def _check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise _Refused(f"has a key {_safe_repr(key)} that is not a string; JSON keys must be strings")
    if key == TAG:
        raise _Refused(f"uses the reserved key {TAG!r}")
    if not key.isascii():
        _storable_text(key, "has a key that")


def _storable_text(text: str, what: str) -> str:
    found = _SURROGATE.search(text)
    if found is not None:
        where = f"U+{ord(found.group()):04X} at index {found.start()}"
        raise _Refused(f"{what} holds a lone surrogate ({where}), {_SURROGATE_HINT}")
    return text


def _readable_int(value: int) -> int:
    digits = _int_digit_limit()
    if -_ten_to(digits) < value < _ten_to(digits):
        return value
    raise _Refused(
        f"is an integer of more than {digits} digits, the most a payload may hold so that every worker "
        "can read it back; pass it as a string (or a Decimal) instead"
    )


def _int_digit_limit() -> int:
    """MAX_INT_DIGITS, or less when this process lowered Python's limit (0 means no limit)."""
    limit = sys.get_int_max_str_digits()
    return min(MAX_INT_DIGITS, limit) if limit else MAX_INT_DIGITS


@functools.cache
def _ten_to(digits: int) -> int:
    return int(10**digits)


def _decimal_text(value: decimal.Decimal) -> str:
    if value.is_nan():
        raise _Refused(f"is {value!r}, which never equals itself; pass None or a string instead")
    return str(value)


def _iso_text(value: dt.datetime | dt.time) -> str:
    text = value.isoformat()
    if text[-16:-7] in ("+00:00:00", "-00:00:00"):  # an offset of +00:00:00.000001 up to -00:00:00.999999
        raise _Refused(
            "has a UTC offset of less than a second, which Python's fromisoformat reads back as UTC; "
            "round the offset to whole seconds"
        )
    return text


_ENCODERS: list[tuple[type, str, Callable[[Any], Any]]] = [
    (dt.datetime, "datetime", _iso_text),
    (dt.date, "date", lambda v: v.isoformat()),
    (dt.time, "time", _iso_text),
    (dt.timedelta, "timedelta", lambda v: [v.days, v.seconds, v.microseconds]),
    (uuid.UUID, "uuid", str),
    (decimal.Decimal, "decimal", _decimal_text),
]


# -- decoding ------------------------------------------------------------------------------------------------


class _Unreadable(Exception):
    """A tagged value that does not decode: its message is the problem, which never quotes the value."""


def decode(text: str) -> dict[str, Any]:
    """The arguments stored in ``text``. Raises PayloadDecodeError when they no longer decode."""
    try:
        value = _DECODER.decode(text)
    except MemoryError:
        raise
    except Exception as exc:  # any text at all: whatever breaks becomes the job's cause, never a halt
        raise PayloadDecodeError(_why_unreadable(text, exc)) from None
    if not isinstance(value, dict):
        raise PayloadDecodeError(f"payload is {_json_kind(value)}, not an object of arguments")
    return value


def decode_value(text: str) -> Any:
    """The value stored in ``text`` by :func:`encode_value`. Raises PayloadDecodeError."""
    try:
        return _DECODER.decode(text)
    except MemoryError:
        raise
    except Exception as exc:
        raise PayloadDecodeError(_why_unreadable(text, exc)) from None


def _decode_hook(obj: dict[str, Any]) -> Any:
    if TAG not in obj:
        return obj
    tag = obj[TAG]
    decoder = _DECODERS.get(tag) if isinstance(tag, str) else None
    if decoder is None:
        shown = _brief(tag) if isinstance(tag, str) else f"that is {_json_kind(tag)}"
        raise _Unreadable(f"has an unknown payload tag {shown}")
    if len(obj) != 2 or "v" not in obj:
        keys = ", ".join(_brief(key) for key in sorted(obj)[:6])
        raise _Unreadable(f"is a tagged {tag} value with keys {keys}; expected exactly {TAG!r} and 'v'")
    try:
        return decoder(obj["v"])
    except _Unreadable:
        raise
    except Exception as exc:
        raise _Unreadable(f"is a tagged {tag} value that does not decode ({type(exc).__name__})") from None


_DECODER = json.JSONDecoder(object_hook=_decode_hook)  # one decoder, not one per call


def _why_unreadable(text: str, exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"payload is not valid JSON: {exc}"  # says where, never quotes the text
    if isinstance(exc, RecursionError):
        return "payload nests too deeply to read (deeper than Python's recursion limit)"
    located = _locate(text)
    if located is not None:
        return located
    if isinstance(exc, _Unreadable):
        return f"a value in the payload {exc}"
    return f"payload does not decode ({type(exc).__name__})"


def _locate(text: str) -> str | None:
    """The first problem in ``text`` with its path, by a slower second reading; None if it finds none."""
    try:
        _decode_at(json.loads(text, parse_int=_int_or_too_long), ())
    except PayloadDecodeError as found:
        return str(found)
    except json.JSONDecodeError as exc:  # a tag failed before the reading reached the broken part
        return f"payload is not valid JSON: {exc}"
    except MemoryError:
        raise
    except Exception:
        return None
    return None


class _TooLong:
    """Stands for an integer with more digits than this process reads from text."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _int_or_too_long(digits: str) -> int | _TooLong:
    try:
        return int(digits)
    except ValueError:
        return _TooLong(len(digits.lstrip("-")))


def _decode_at(value: Any, path: tuple[str | int, ...]) -> Any:
    """``value`` decoded as the hook would, depth first; the first problem raises with its path."""
    if isinstance(value, list):
        return [_decode_at(item, (*path, index)) for index, item in enumerate(value)]
    if isinstance(value, dict):
        obj = {key: _decode_at(item, (*path, key)) for key, item in value.items()}
        try:
            return _decode_hook(obj)
        except _Unreadable as exc:
            raise PayloadDecodeError(f"{_format_path(path)} {exc}") from None
    if isinstance(value, _TooLong):
        limit = sys.get_int_max_str_digits()
        raise PayloadDecodeError(
            f"{_format_path(path)} is an integer of {value.digits} digits, more than this process reads "
            f"from text ({limit}; see sys.set_int_max_str_digits)"
        )
    return value


def _format_path(path: tuple[str | int, ...]) -> str:
    steps = [f"[{_brief(step)}]" if isinstance(step, str) else f"[{step}]" for step in path]
    if path and isinstance(path[0], str):
        return _path(f"argument {_brief(path[0])}", steps[1:])
    return _path("payload", steps)


def _decode_iso(kind: type[dt.date] | type[dt.time]) -> Callable[[Any], Any]:
    name = kind.__name__

    def decode_iso(value: Any) -> Any:
        text = _expect(value, str, name, "ISO 8601 text")
        try:
            return kind.fromisoformat(text)
        except ValueError:
            raise _Unreadable(f"is a tagged {name} whose text is not an ISO 8601 {name}") from None

    return decode_iso


def _decode_timedelta(value: Any) -> dt.timedelta:
    parts = _expect(value, list, "timedelta", "[days, seconds, microseconds]")
    if len(parts) != 3 or any(type(part) is not int for part in parts):
        raise _Unreadable("is a tagged timedelta that is not [days, seconds, microseconds] in integers")
    try:
        return dt.timedelta(days=parts[0], seconds=parts[1], microseconds=parts[2])
    except OverflowError:
        raise _Unreadable("is a tagged timedelta out of range (at most 999999999 days)") from None


def _decode_uuid(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(_expect(value, str, "uuid", "text"))
    except ValueError:
        raise _Unreadable("is a tagged uuid whose text is not a UUID") from None


def _decode_decimal(value: Any) -> decimal.Decimal:
    try:
        number = decimal.Decimal(_expect(value, str, "decimal", "text"))
    except decimal.InvalidOperation:
        raise _Unreadable("is a tagged decimal whose text is not a number a Decimal can hold") from None
    if number.is_nan():
        raise _Unreadable("is a tagged decimal that is NaN, which encode never stores")
    return number


def _decode_collection(kind: type[tuple[Any, ...]] | type[set[Any]] | type[frozenset[Any]]) -> Any:
    name = kind.__name__

    def decode_collection(value: Any) -> Any:
        items = _expect(value, list, name, "an array")
        try:
            return kind(items)
        except TypeError:  # an array or an object cannot be a member of a set
            raise _Unreadable(f"is a tagged {name} holding an item that cannot be in a {name}") from None

    return decode_collection


def _expect(value: Any, kind: type, tag: str, expected: str) -> Any:
    if not isinstance(value, kind):
        raise _Unreadable(f"is a tagged {tag} whose 'v' is {_json_kind(value)}; expected {expected}")
    return value


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "datetime": _decode_iso(dt.datetime),
    "date": _decode_iso(dt.date),
    "time": _decode_iso(dt.time),
    "timedelta": _decode_timedelta,
    "uuid": _decode_uuid,
    "decimal": _decode_decimal,
    "tuple": _decode_collection(tuple),
    "set": _decode_collection(set),
    "frozenset": _decode_collection(frozenset),
}


# -- messages ------------------------------------------------------------------------------------------------

_JSON_KINDS: list[tuple[Any, str]] = [
    (bool, "a boolean"),
    (int | float, "a number"),
    (str, "a string"),
    (list, "an array"),
]


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words: never the value itself."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    for kind, words in _JSON_KINDS:
        if isinstance(value, kind):
            return words
    return f"a tagged {type(value).__name__}"


def _path(head: str, steps: list[str]) -> str:
    """``head`` followed by its steps; a long path keeps its first and last steps."""
    if len(steps) > 16:
        steps = [*steps[:8], f"[... {len(steps) - 12} more ...]", *steps[-4:]]
    return head + "".join(steps)


def _brief(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut to about ``limit`` characters: names in messages stay short."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}..."


def _safe_repr(value: object, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}..."
