"""The per-Attempt scope: one handler call, and the clean-up that follows it, in a worker thread.

When the Attempt ends (returned, raised or cancelled) the scope closes what the handler registered on
``context.scope`` (last first), sends ``attempt_finished``, and treats this thread's database connections the
way Django does after a request: a transaction left open is rolled back, and a connection that is unusable or
past ``CONN_MAX_AGE`` is closed.

While the handler runs, a :class:`DatabaseGuard` sits on this thread's connections. When the Pump gives up on
the Attempt (a timeout it ignored, a lost lease, the end of a shutdown), it revokes the guard before the job's
lease is given up: every statement the handler sends from then on, and every commit (which Django sends past
the execute wrappers), raises :class:`AttemptRevoked`, so its ``on_commit`` callbacks never run; and the store
cuts off any transaction it holds open (on the server, or on SQLite on the connection itself), so nothing it
did is committed. The connections of a revoked Attempt are closed when it ends.

The test pump runs its Attempts through the same :func:`run_attempt`, signals included; only the isolation
around the handler (a savepoint) and what happens to the connections afterwards (nothing) are its own.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import connections

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
        self._revoking = threading.Lock()

    def install(self) -> None:
        """In the handler's thread, before it runs."""
        self.sessions = list(connections.all())
        for session in self.sessions:
            session.execute_wrappers.append(self._check)
            session.commit = self._guarded_commit(session.commit)  # shadows the method on this wrapper only

    def uninstall(self) -> None:
        """In the handler's thread, after it ran."""
        for session in self.sessions:
            if self._check in session.execute_wrappers:
                session.execute_wrappers.remove(self._check)
            vars(session).pop("commit", None)

    def _refuse_if_revoked(self) -> None:
        if self.revoked:
            raise AttemptRevoked(
                f"job {self.job_id}: this Attempt was given up (timed out, lost its lease, or shut down); "
                "its handler may not use the database any more"
            )

    def _check(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self._refuse_if_revoked()
        return execute(sql, params, many, context)

    def _guarded_commit(self, commit: Callable[[], None]) -> Callable[[], None]:
        def guarded() -> None:
            self._refuse_if_revoked()
            commit()

        return guarded

    def revoke(self, cut_off: Callable[[Sequence[Any]], None]) -> None:
        """From the Pump's thread (or its cut-off alarm): refuse further statements and commits, then let the
        store cut off open transactions. Once: a second call waits for the first to be done, and returns."""
        with self._revoking:
            if self.revoked:
                return
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


class HandlerReturnedAwaitable(TypeError):
    """A synchronous handler returned something that needs awaiting: the work it stands for never ran."""


def refuse_awaitable(registration: JobRegistration, value: object) -> None:
    """A synchronous handler's result is never awaited, so an awaitable one means its work never ran: fail
    the Attempt (raise) rather than record a success, and close a coroutine so it is not left un-awaited."""
    if not inspect.isawaitable(value):
        return
    what = "a coroutine" if inspect.iscoroutine(value) else "an awaitable"
    close = getattr(value, "close", None)  # a coroutine's: it is then never reported as un-awaited
    if callable(close):
        try:
            close()
        except Exception as exc:
            logger.warning("closing what %s returned failed: %s", registration.handler_path, describe(exc))
    raise HandlerReturnedAwaitable(
        f"{registration.handler_path} returned {what} ({type(value).__name__}), which nothing awaits, so its "
        "work never ran: was it meant to be async? Run the async work inside the handler "
        "(asyncio.run(...)) and return its result"
    )


def close_connections(*, revoked: bool = False) -> None:
    """After an Attempt: roll back what the handler left open, then close as Django does after a request
    (every connection, if the Attempt was revoked: the store has cut them off)."""
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
            if revoked:
                conn.close()
            else:
                conn.close_if_unusable_or_obsolete()
        except Exception:
            logger.exception("closing connection %r after an Attempt failed; closing it hard", conn.alias)
            conn.close()


def keep_connections(*, revoked: bool = False) -> None:
    """The test pump's ``release``: handlers share the test's connection and transaction, left as they are."""


def run_attempt(
    registration: JobRegistration,
    arguments: dict[str, Any],
    context: JobContext,
    guard: DatabaseGuard,
    *,
    isolation: Callable[[], AbstractContextManager[Any]] = nullcontext,
    release: Callable[..., None] = close_connections,
) -> AttemptResult:
    """Run exactly one handler call inside a fresh scope; never raises.

    The Pump and the test pump run every Attempt through here, so both send ``attempt_started`` and
    ``attempt_finished`` around the same steps. What differs is passed in: ``isolation`` wraps the start
    signal, the handler and its clean-ups (the test pump: a savepoint, so a handler that breaks the
    transaction fails only its Attempt), and ``release`` runs last (the Pump: :func:`close_connections`; the
    test pump: :func:`keep_connections`, so handlers see the test's transaction)."""
    result = AttemptResult()
    guard.install()
    try:
        with isolation():
            _call(registration, arguments, context)
    except BaseException as exc:  # the handler's failure is an outcome, not a crash of the pump
        result = AttemptResult.failed(exc)
    finally:
        try:
            for receiver, error in attempt_finished.send_robust(sender=registration, context=context):
                if isinstance(error, Exception):
                    logger.error("an attempt_finished receiver (%r) raised: %s", receiver, describe(error))
        finally:
            guard.uninstall()
            release(revoked=guard.revoked)
    return result


def _call(registration: JobRegistration, arguments: dict[str, Any], context: JobContext) -> None:
    """``attempt_started``, the handler, then the scope's clean-ups (always); raises what failed first. A
    clean-up that fails is logged, and fails the Attempt only if nothing failed before it."""
    failure: BaseException | None = None
    try:
        attempt_started.send(sender=registration, context=context)
        refuse_awaitable(registration, registration.execute(arguments, context))
    except BaseException as exc:
        failure = exc
    try:
        context.scope.close()
    except BaseException as exc:
        logger.error("a clean-up registered by job %s failed: %s", context.job_id, describe(exc))
        failure = failure or exc
    if failure is not None:
        raise failure
