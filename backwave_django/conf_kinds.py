"""What a settings key may hold. Each kind accepts or refuses a value (never raising, whatever the value),
says in words what it accepts, and parses what it accepted. :mod:`backwave_django.conf` gives every key one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, Protocol

from .core.names import QUEUE_NAME_RULE, is_queue_name


def shown(value: object) -> str:
    """A short rendering of a setting's value for a message; never raises, whatever the value."""
    try:
        text = repr(value)
    except Exception:  # an int past Python's digit limit, a structure too deep, a broken __repr__
        size = f" of {value.bit_length()} bits" if isinstance(value, int) else ""
        text = f"<{type(value).__name__}{size}>"
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def is_name(value: object) -> bool:
    """Whether ``value`` is a valid queue name (group names follow the same rule). The type is checked first,
    so that a value whose repr raises (an int past Python's digit limit, a list nested too deep) never
    reaches the validator's message."""
    return isinstance(value, str) and is_queue_name(value)


def number(value: float) -> str:
    """``2592000.0`` as ``2592000``, ``0.001`` as ``0.001``: a bound, in full."""
    return str(int(value)) if float(value).is_integer() else repr(value)


def span(seconds: float) -> str:
    """``3600`` as ``1 hour``, ``0.5`` as ``0.5 s``: a bound of a duration, in words."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count > 1 else ''}"
    return f"{number(seconds)} s"


class Kind(Protocol):
    @property
    def rule(self) -> str:
        """What a value must be, after "not": ``an int from 1 to 1000``."""

    @property
    def write(self) -> str:
        """What to write, after "Write": may say more than :attr:`rule` (the forms a value can take)."""

    def accepts(self, value: Any) -> bool: ...

    def parse(self, value: Any) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Count:
    """An int (not a bool) from ``low`` to ``high``."""

    low: int
    high: int

    @property
    def rule(self) -> str:
        return f"an int from {self.low} to {self.high}"

    write = rule

    def accepts(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high

    def parse(self, value: Any) -> int:
        return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Number:
    """A finite int or float (not a bool) from ``low`` to ``high``: a factor, not a duration."""

    low: float
    high: float

    @property
    def rule(self) -> str:
        return f"a number from {number(self.low)} to {number(self.high)}"

    write = rule

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return self.low <= value <= self.high  # exact for huge ints; False for NaN

    def parse(self, value: Any) -> float:
        return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Duration:
    """Seconds (an int or float, not a bool) or a ``timedelta``, from ``low`` to ``high`` seconds; with
    ``none_ok``, also None (no limit)."""

    low: float
    high: float
    none_ok: bool = False

    @property
    def rule(self) -> str:
        none = ", or None" if self.none_ok else ""
        return f"a duration from {span(self.low)} to {span(self.high)}{none}"

    @property
    def write(self) -> str:
        high = number(self.high) + (f" ({span(self.high)})" if self.high >= 60 else "")
        none = ", or None for no limit" if self.none_ok else ""
        low = number(self.low)
        return f"a number of seconds from {low} to {high} or a datetime.timedelta in that range{none}"

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.none_ok
        if isinstance(value, timedelta):
            return self.low <= value.total_seconds() <= self.high
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return self.low <= value <= self.high  # exact for huge ints; False for NaN

    def parse(self, value: Any) -> timedelta | None:
        if value is None or isinstance(value, timedelta):
            return value
        return timedelta(seconds=float(value))


@dataclass(frozen=True, slots=True)
class Flag:
    """``True`` or ``False``, and nothing that merely looks like one (``1``, ``"yes"``)."""

    rule = write = "True or False"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)

    def parse(self, value: Any) -> bool:
        return bool(value)


@dataclass(frozen=True, slots=True)
class OneOf:
    """One of a few strings."""

    options: tuple[str, ...]

    @property
    def rule(self) -> str:
        return " or ".join(map(repr, self.options))

    write = rule

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def parse(self, value: Any) -> str:
        return str(value)


@dataclass(frozen=True, slots=True)
class OptionalPath:
    """A ``str`` or ``Path``, or None (an empty string is None too)."""

    rule = write = "a str, a pathlib.Path or None"

    def accepts(self, value: Any) -> bool:
        return value is None or isinstance(value, str | Path)

    def parse(self, value: Any) -> Path | None:
        return Path(value) if value else None


#: PostgreSQL's rule for an unquoted identifier, lower case (``LISTEN`` folds an unquoted name to lower case,
#: ``pg_notify`` does not), at most NAMEDATALEN - 1 bytes.
_CHANNEL = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class Channel:
    """A PostgreSQL notification channel: an unquoted lower-case identifier of at most 63 characters."""

    rule = write = (
        "a lower-case PostgreSQL identifier of 1 to 63 characters (a-z, 0-9 and _, not starting with a digit)"
    )

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and _CHANNEL.fullmatch(value) is not None

    def parse(self, value: Any) -> str:
        return str(value)


#: A bearer token as an HTTP header carries it: visible ASCII, no spaces.
_TOKEN = re.compile(r"[!-~]{16,512}")


@dataclass(frozen=True, slots=True)
class OptionalToken:
    """None, or a secret of 16 to 512 visible ASCII characters (it travels in an ``Authorization`` header)."""

    rule = write = "None, or a str of 16 to 512 visible ASCII characters (no spaces)"

    def accepts(self, value: Any) -> bool:
        return value is None or (isinstance(value, str) and _TOKEN.fullmatch(value) is not None)

    def parse(self, value: Any) -> str | None:
        return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Shape:
    """A structured value (GROUPS, RETRY, QUEUES, DATABASE) that :mod:`~backwave_django.conf` checks with
    code of its own; ``rule`` describes it for the docs."""

    rule: str

    @property
    def write(self) -> str:
        return self.rule

    def accepts(self, value: Any) -> bool:
        return True

    def parse(self, value: Any) -> Any:
        return value


#: How a group's QUEUES can be wrong, each under a check id of its own (``conf.QUEUES_CHECKS``): a shape
#: that does not fit POLICY (or nothing in it), a name that breaks the queue-name rule, a queue listed twice,
#: a weight out of range.
QueuesProblem = Literal["shape", "name", "twice", "weight"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Queues:
    """A group's QUEUES: a list of distinct queue names (POLICY 'strict'), or a dict of name: weight
    ('weighted'). Which one depends on POLICY, so :meth:`problem` is told; :meth:`accepts` leaves it to it."""

    weight: Count
    rule = write = "a list of queue names, or with POLICY 'weighted' a dict of queue name: weight"
    name_hint = f"Name each queue with {QUEUE_NAME_RULE}, e.g. 'emails' or 'reports.daily'."

    def accepts(self, value: Any) -> bool:
        return True

    def parse(self, value: Any) -> Any:
        return value

    def problem(self, value: Any, *, weighted: bool) -> tuple[QueuesProblem, str, str] | None:
        """What is wrong with ``value``: which kind of problem, what (after "QUEUES "), and what to write
        instead; or None."""
        return self._weighted_problem(value) if weighted else self._strict_problem(value)

    def _strict_problem(self, queues: Any) -> tuple[QueuesProblem, str, str] | None:
        hint = (
            "Write QUEUES as a list of distinct queue names in priority order, e.g. ['critical', 'default']."
        )
        if not isinstance(queues, list | tuple) or not queues:
            return "shape", f"is {shown(queues)}, not a non-empty list of queue names.", hint
        seen: set[str] = set()
        for queue in queues:
            if not is_name(queue):
                return "name", f"lists {shown(queue)}, which is not a valid queue name.", self.name_hint
            if queue in seen:
                return "twice", f"lists {queue!r} twice.", "List each queue once, in priority order."
            seen.add(queue)
        return None

    def _weighted_problem(self, queues: Any) -> tuple[QueuesProblem, str, str] | None:
        hint = (
            "With POLICY 'weighted', write QUEUES as a dict of queue name: weight, e.g. "
            f"{{'reports': 3, 'exports': 1}}, each weight {self.weight.rule}."
        )
        if not isinstance(queues, dict) or not queues:
            return "shape", f"is {shown(queues)}, not a non-empty dict of queue name: weight.", hint
        for queue, weight in queues.items():
            if not is_name(queue):
                return "name", f"lists {shown(queue)}, which is not a valid queue name.", self.name_hint
            if not self.weight.accepts(weight):
                return "weight", f"gives {queue!r} the weight {shown(weight)}, not {self.weight.rule}.", hint
        return None


@dataclass(frozen=True, slots=True)
class Derived:
    """A default computed from the group's other values: ``text`` says how, for the docs and hints."""

    text: str
    compute: Callable[[dict[str, Any]], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Key:
    """One settings key: what it holds (and so its range), its default, the check that reports it, and
    why its range is what it is (the end of the check's hint)."""

    kind: Kind
    default: Any
    check: str
    why: str = ""

    def hint(self, name: str) -> str:
        """What to write instead of a value :attr:`kind` refused."""
        if isinstance(self.default, Derived):
            example = f", or leave {name} out to use {self.default.text}"
        else:
            example = f", e.g. {name!r}: {self.default!r} (the default)"
        return f"Write {self.kind.write}{example}.{' ' + self.why if self.why else ''}"
