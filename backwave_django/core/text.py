"""Text we store from handlers and errors: always storable, always bounded.

Every message, cause, traceback and health detail passes through :func:`clean` before a store writes it:
NUL characters are dropped (PostgreSQL text cannot hold them), lone surrogates become U+FFFD (no database can
encode them), and the result is cut to a bound in UTF-8 bytes without splitting a character. A traceback
keeps its *end*, where the exception that was finally raised is. :func:`describe` turns any exception into a
one-line message without ever raising, even when its ``__str__`` does.
"""

from __future__ import annotations

import re
import traceback

#: The short reason of an outcome (an error's first line, a cause): bytes of UTF-8.
MAX_MESSAGE_BYTES = 2048
#: A failure's traceback: bytes of UTF-8; the end is kept.
MAX_DETAIL_BYTES = 8192

_SURROGATES = re.compile("[\ud800-\udfff]")
CUT_MARK = "[...]"


def _storable(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        text = _SURROGATES.sub("\ufffd", text)
    return text


def clean(text: object, max_bytes: int = MAX_MESSAGE_BYTES, *, keep: str = "start") -> str:
    """``text`` made storable and cut to ``max_bytes`` bytes of UTF-8 (``keep``: "start" or "end").

    A cut text carries :data:`CUT_MARK` where it was cut, unless the bound leaves no room for the mark.
    """
    value = _storable(_safe_str(text))
    if len(value) * 4 <= max_bytes:
        return value  # cannot exceed the bound, whatever its characters
    data = value.encode("utf-8")
    if len(data) <= max_bytes:
        return value
    mark = CUT_MARK if max_bytes > len(CUT_MARK) else ""
    room = max(0, max_bytes - len(mark))
    if keep == "end":
        return mark + data[len(data) - room :].decode("utf-8", "ignore")
    return data[:room].decode("utf-8", "ignore") + mark


def _safe_str(value: object) -> str:
    """``str(value)`` as a plain ``str`` (never a subclass, whose methods could raise); never raises."""
    if type(value) is str:
        return value
    try:
        text = value if isinstance(value, str) else str(value)
        return str.__str__(text)  # a plain copy of a str subclass, without calling its methods
    except BaseException:  # a hostile __str__ must not escape into the Pump
        return f"<{type(value).__name__} whose str() raised>"


def describe(exc: BaseException, max_bytes: int = MAX_MESSAGE_BYTES) -> str:
    """``"ExceptionType: first line of its message"`` (or just the type), storable, bounded, never raising."""
    name = _safe_str(getattr(type(exc), "__name__", "Exception"))
    message = _safe_str(exc)
    line = message.strip().splitlines()[0] if message.strip() else ""
    return clean(f"{name}: {line}" if line else name, max_bytes)


def format_traceback(exc: BaseException, max_bytes: int = MAX_DETAIL_BYTES) -> str:
    """The formatted traceback of ``exc``, storable, keeping its end; never raises."""
    try:
        text = "".join(traceback.format_exception(exc))
    except BaseException:
        text = describe(exc)
    return clean(text, max_bytes, keep="end")
