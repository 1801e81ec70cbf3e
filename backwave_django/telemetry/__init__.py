"""OpenTelemetry traces and metrics: the hooks the rest of backwave calls, and nothing else.

Install the extra (``pip install backwave-django[otel]``, which brings ``opentelemetry-api`` only) and
configure an SDK in your project; backwave then records the trace context each job is enqueued in, runs each
Attempt in a span linked to it, and reports its metrics (``docs/howto/telemetry.md`` lists them). Without the
API installed these hooks do nothing: :mod:`._otel`, the only module that imports ``opentelemetry``, is never
loaded, and each hook is a call that returns at once. With the API but no SDK, the API's own no-op tracer and
meter answer.

The shell calls these hooks at a handful of points: enqueue (:func:`trace_context`, :func:`enqueued`), the
per-Attempt scope (:func:`attempt_started`, :func:`attempt_finished`) and the command runner (:func:`obey`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..context import JobContext
    from ..core.commands import Command
    from ..core.events import Event
    from ..shell.runner import CommandRunner
    from ..shell.scope import AttemptResult

try:
    from . import _otel
except ImportError as exc:  # the extra is not installed: every hook below is a no-op
    if not (exc.name or "").startswith("opentelemetry"):
        raise
    _otel = None  # type: ignore[assignment]

#: Whether ``opentelemetry-api`` is installed (it may still have no SDK behind it).
AVAILABLE = _otel is not None


def trace_context() -> str:
    """The W3C trace context of the current span, as JSON for ``Job.trace_context``; empty without one."""
    return "" if _otel is None else _otel.trace_context()


def enqueued(queue: str, count: int) -> None:
    """``count`` jobs were enqueued to ``queue``."""
    if _otel is not None:
        _otel.enqueued(queue, count)


def attempt_started(context: JobContext) -> Any:
    """In the handler's thread, as its Attempt begins: a handle for :func:`attempt_finished`, or None. Never
    raises: telemetry that fails is logged, and the Attempt runs all the same."""
    if _otel is None:
        return None
    try:
        return _otel.attempt_started(context)
    except Exception:
        _otel.failed("start an Attempt's span")
        return None


def attempt_finished(handle: Any, result: AttemptResult) -> None:
    """In the same thread, once the Attempt has ended (``result`` says how). Never raises (an exception whose
    ``str()`` raises, say, must not change the Attempt's outcome)."""
    if handle is not None and _otel is not None:
        try:
            _otel.attempt_finished(handle, result)
        except Exception:
            _otel.failed("end an Attempt's span")


def obey(
    command: Command, runner: CommandRunner, run: Callable[[Command], Sequence[Event]]
) -> Sequence[Event]:
    """``run(command)``, observed: the metrics its replies carry, and with ``DEBUG_SPANS`` a span around a
    claim, a report or a lease sweep. Raises what ``run`` raises."""
    return run(command) if _otel is None else _otel.obey(command, runner, run)
