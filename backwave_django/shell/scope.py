"""The per-Attempt scope: one handler call, and the clean-up that follows it, in a worker thread.

When the Attempt ends (returned, raised or cancelled) the scope closes what the handler registered on
``context.scope`` (last first), sends ``attempt_finished``, and treats this thread's database connections the
way Django does after a request: a transaction left open is rolled back, and a connection that is unusable or
past ``CONN_MAX_AGE`` is closed.

While the handler runs, a :class:`DatabaseGuard` sits on this thread's connections. When the Pump gives up on
the Attempt (a timeout it ignored, a lost lease, the end of a shutdown), it revokes the guard before the job's
lease is given up: every statement the handler sends from then on raises :class:`AttemptRevoked`, and the
store cuts off any transaction it holds open, so nothing it does afterwards is committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections

from .. import telemetry
from ..context import JobContext
from ..core.text import describe, format_traceback
from ..registry import JobRegistration
from ..signals import attempt_finished, attempt_started

logger = logging.getLogger("backwave.scope")


class AttemptRevoked(Exception):
    """Raised on a database statement of a handler whose Attempt the Pump has given up on."""


class DatabaseGuard:
    """Sits on the database connections of one Attempt's thread; :meth:`revoke` (from another thread) stops
    every statement they send from then on."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.revoked = False
        self.sessions: list[Any] = []  # this thread's Django connection wrappers

    def install(self) -> None:
        """In the handler's thread, before it runs."""
        self.sessions = list(connections.all())
        for session in self.sessions:
            session.execute_wrappers.append(self._check)

    def uninstall(self) -> None:
        """In the handler's thread, after it ran."""
        for session in self.sessions:
            if self._check in session.execute_wrappers:
                session.execute_wrappers.remove(self._check)

    def _check(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.revoked:
            raise AttemptRevoked(
                f"job {self.job_id}: this Attempt was given up (timed out, lost its lease, or shut down); "
                "its handler may not use the database any more"
            )
        return execute(sql, params, many, context)

    def revoke(self, cut_off: Callable[[Sequence[Any]], None]) -> None:
        """From the Pump's thread: refuse further statements, then let the store cut off open transactions."""
        self.revoked = True
        try:
            cut_off(self.sessions)
        except Exception:
            logger.exception(
                "job %s: could not cut off the database sessions of a given-up Attempt", self.job_id
            )


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """How the handler call ended: ``error`` is None on success; ``message`` and ``detail`` are storable."""

    error: BaseException | None = None
    message: str = ""
    detail: str = ""

    @classmethod
    def failed(cls, error: BaseException) -> AttemptResult:
        return cls(error=error, message=describe(error), detail=format_traceback(error))


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
    registration: JobRegistration, arguments: dict[str, Any], context: JobContext, guard: DatabaseGuard
) -> AttemptResult:
    """Run exactly one handler call inside a fresh scope; never raises."""
    result = AttemptResult()
    guard.install()
    observed = telemetry.attempt_started(context)
    try:
        attempt_started.send(sender=registration, context=context)
        registration.execute(arguments, context)
    except BaseException as exc:  # the handler's failure is an outcome, not a crash of the pump
        result = AttemptResult.failed(exc)
    finally:
        try:
            context.scope.close()
        except BaseException as exc:
            logger.error("a clean-up registered by job %s failed: %s", context.job_id, describe(exc))
            if result.error is None:
                result = AttemptResult.failed(exc)
        try:
            for receiver, error in attempt_finished.send_robust(sender=registration, context=context):
                if isinstance(error, Exception):
                    logger.error("an attempt_finished receiver (%r) raised: %s", receiver, describe(error))
        finally:
            telemetry.attempt_finished(observed, result)
            guard.uninstall()
            close_connections()
    return result
