"""Copies of the stores' frozen values with some fields changed.

:func:`replace` means what ``dataclasses.replace`` means, and is used where the in-memory store copies a
value on every claim, report and mint: for a slotted dataclass whose ``__init__`` only sets its fields (no
``__post_init__``, no init-only or non-init fields), it copies the fields straight into a new instance,
without building keyword arguments or calling ``__init__``, at about a third of the cost. Any other
dataclass goes through ``dataclasses.replace`` itself.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_set = object.__setattr__
#: The field names of each class seen (as a tuple to copy and a frozenset to check), or None: not plain.
_PLAIN: dict[type, tuple[tuple[str, ...], frozenset[str]] | None] = {}


def _plain_fields(cls: type) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """The fields of ``cls`` when a copy may skip ``__init__``, else None."""
    fields = dataclasses.fields(cls)
    plain = (
        "__slots__" in cls.__dict__
        and not hasattr(cls, "__post_init__")
        and all(f.init and f._field_type is dataclasses._FIELD for f in fields)  # type: ignore[attr-defined]
        and len(fields) == len(cls.__dataclass_fields__)  # type: ignore[attr-defined]  # no InitVar
    )
    names = tuple(f.name for f in fields)
    return (names, frozenset(names)) if plain else None


def replace[T: DataclassInstance](value: T, /, **changes: Any) -> T:
    """A copy of ``value`` with ``changes``, as ``dataclasses.replace``."""
    cls = type(value)
    try:
        plain = _PLAIN[cls]
    except KeyError:
        plain = _PLAIN[cls] = _plain_fields(cls)
    if plain is None or not changes.keys() <= plain[1]:
        return dataclasses.replace(value, **changes)  # and its error, for a name that is not a field
    copy = object.__new__(cls)
    for name in plain[0]:
        _set(copy, name, changes[name] if name in changes else getattr(value, name))
    return copy
