"""Payload encoding: job arguments to JSON text and back.

Plain JSON values pass through. Dates, times, datetimes, timedeltas, UUIDs, Decimals, tuples and sets are
written as tagged objects (``{"$bw": "datetime", "v": "..."}``) so they decode to the same type. Anything else
(a model instance, a file, an arbitrary object) is refused at enqueue with an error naming the argument.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

TAG = "$bw"


class PayloadError(TypeError):
    """An argument cannot be stored as a job payload. The message names the argument and what it was."""


class PayloadDecodeError(ValueError):
    """A stored payload no longer decodes: the job is unroutable."""


_ENCODERS: list[tuple[type, str, Callable[[Any], Any]]] = [
    (dt.datetime, "datetime", lambda v: v.isoformat()),
    (dt.date, "date", lambda v: v.isoformat()),
    (dt.time, "time", lambda v: v.isoformat()),
    (dt.timedelta, "timedelta", lambda v: [v.days, v.seconds, v.microseconds]),
    (uuid.UUID, "uuid", str),
    (decimal.Decimal, "decimal", str),
]
_DECODERS: dict[str, Callable[[Any], Any]] = {
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
}


def _encode(value: Any, path: str) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise PayloadError(f"{path} is {value!r}, which JSON cannot represent")
        return value
    for kind, tag, encode in _ENCODERS:
        if isinstance(value, kind):
            return {TAG: tag, "v": encode(value)}
    if isinstance(value, list):
        return [_encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        tag = type(value).__name__ if type(value) in (tuple, set, frozenset) else "tuple"
        return {TAG: tag, "v": [_encode(item, f"{path}[{i}]") for i, item in enumerate(items)]}
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PayloadError(
                    f"{path} has a key {key!r} that is not a string; JSON keys must be strings"
                )
            if key == TAG:
                raise PayloadError(f"{path} uses the reserved key {TAG!r}")
            out[key] = _encode(item, f"{path}[{key!r}]")
        return out
    raise PayloadError(
        f"{path} is a {type(value).__module__}.{type(value).__qualname__}, which cannot be stored in a job "
        "payload; pass plain data instead (for a model instance, pass its primary key and load it in the job)"
    )


def encode(arguments: Mapping[str, Any]) -> str:
    """JSON text for ``arguments`` (parameter name to value). Raises PayloadError naming the argument."""
    encoded = {name: _encode(value, f"argument {name!r}") for name, value in arguments.items()}
    return json.dumps(encoded, separators=(",", ":"), ensure_ascii=False)


def _decode_hook(obj: dict[str, Any]) -> Any:
    if TAG not in obj:
        return obj
    tag = obj[TAG]
    decoder = _DECODERS.get(tag) if isinstance(tag, str) else None
    if decoder is None:
        raise PayloadDecodeError(f"unknown payload tag {tag!r}")
    if set(obj) != {TAG, "v"}:
        raise PayloadDecodeError(
            f"a tagged {tag} value has keys {sorted(obj)}; expected exactly {TAG!r} and 'v'"
        )
    try:
        return decoder(obj["v"])
    except (TypeError, ValueError, IndexError, decimal.InvalidOperation) as exc:
        raise PayloadDecodeError(f"bad {tag} value {obj['v']!r}: {exc}") from None


def decode(text: str) -> dict[str, Any]:
    """The arguments stored in ``text``. Raises PayloadDecodeError when they no longer decode."""
    try:
        value = json.loads(text, object_hook=_decode_hook)
    except json.JSONDecodeError as exc:
        raise PayloadDecodeError(f"payload is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise PayloadDecodeError(f"payload is a JSON {type(value).__name__}, not an object of arguments")
    return value
