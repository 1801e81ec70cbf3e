"""The per-Attempt scope: one handler call, and the clean-up that follows it, in a worker thread.

When the Attempt ends (returned, raised or cancelled) the scope closes what the handler registered on
``context.scope`` (last first), sends ``attempt_finished``, and treats this thread's database connections the
way Django does after a request: a transaction left open is rolled back, and a connection that is unusable or
past ``CONN_MAX_AGE`` is closed.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import Any

from django.db import connections

from ..context import JobContext
from ..registry import JobRegistration
from ..signals import attempt_finished, attempt_started

logger = logging.getLogger("backwave.scope")
MAX_MESSAGE = 500


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """How the handler call ended: ``error`` is None on success; ``detail`` is the formatted traceback."""

    error: BaseException | None = None
    detail: str = ""

    @property
    def message(self) -> str:
        if self.error is None:
            return ""
        text = (
            f"{type(self.error).__name__}: {self.error}".splitlines()[0]
            if str(self.error)
            else type(self.error).__name__
        )
        return text[:MAX_MESSAGE]


def close_connections() -> None:
    """After an Attempt: roll back what the handler left open, then close as Django does after a request."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        try:
            if conn.in_atomic_block:
                # An atomic block entered by hand and never exited: discard it and reset the wrapper.
                logger.error("a handler left an atomic block open on %r; rolling it back", conn.alias)
                conn.connection.rollback()
                conn.in_atomic_block = False
                conn.savepoint_ids = []
                conn.atomic_blocks = []
                conn.needs_rollback = False
                conn.closed_in_transaction = False
                conn.set_autocommit(True)
            elif not conn.get_autocommit():
                conn.rollback()
                conn.set_autocommit(True)
            conn.close_if_unusable_or_obsolete()
        except Exception:
            logger.exception("closing connection %r after an Attempt failed; closing it hard", conn.alias)
            conn.close()


def run_attempt(
    registration: JobRegistration, arguments: dict[str, Any], context: JobContext
) -> AttemptResult:
    """Run exactly one handler call inside a fresh scope; never raises."""
    result = AttemptResult()
    try:
        attempt_started.send(sender=registration, context=context)
        registration.execute(arguments, context)
    except BaseException as exc:  # the handler's failure is an outcome, not a crash of the pump
        result = AttemptResult(error=exc, detail="".join(traceback.format_exception(exc)))
    finally:
        try:
            context.scope.close()
        except Exception as exc:
            logger.exception("a clean-up registered by job %s failed", context.job_id)
            if result.error is None:
                result = AttemptResult(error=exc, detail="".join(traceback.format_exception(exc)))
        try:
            for receiver, error in attempt_finished.send_robust(sender=registration, context=context):
                if isinstance(error, Exception):
                    logger.error(
                        "an attempt_finished receiver (%r) raised: %r", receiver, error, exc_info=error
                    )
        finally:
            close_connections()
    return result
