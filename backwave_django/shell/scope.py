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

An ``async def`` handler runs on the Pump's event loop instead (:func:`run_attempt_async`), inside its own
``ThreadSensitiveContext``: the ORM calls it makes through Django's async API (``sync_to_async``) run on a
thread of this Attempt's own, created at the first one, whose connections get the guard as they open and are
closed when the Attempt ends, as Django's ASGI handler does for a request. An Attempt that never touches the
database costs no thread at all.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from asgiref.sync import ThreadSensitiveContext, async_to_sync, sync_to_async
from django.db import connections
from django.db.backends.signals import connection_created

from .. import telemetry
from ..context import JobContext
from ..core.text import describe, format_traceback
from ..core.values import value
from ..registry import JobRegistration
from ..signals import attempt_finished, attempt_started

logger = logging.getLogger("backwave.scope")


class AttemptRevoked(Exception):
    """Raised on a database statement of a handler whose Attempt the Pump has given up on."""


class DatabaseGuard:
    """Sits on the database connections of one Attempt's thread; :meth:`revoke` (from another thread) stops
    every statement they send from then on.

    A worker thread's connections are watched once, for the thread's life (Django keeps one connection
    wrapper per alias and thread), by a check that asks the guard on duty in that thread; :meth:`install`
    puts this guard on duty and :meth:`uninstall` takes it off, so an Attempt costs two assignments instead of
    hooking and unhooking every connection. Connections an async Attempt's own thread opens are hooked as they
    open (:meth:`adopt`), and unhooked when it ends."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.revoked = False
        self.sessions: list[Any] = []  # this thread's Django connection wrappers
        self._adopted: list[Any] = []
        self._revoking = threading.Lock()

    def install(self) -> None:
        """In the handler's thread, before it runs."""
        self.sessions = _watched_sessions()
        _on_duty.guard = self

    def adopt(self, session: Any) -> None:
        """A connection an async Attempt's thread opened: guard it too (from ``connection_created``)."""
        if session not in self.sessions:
            self.sessions.append(session)
            self._adopted.append(session)
            session.execute_wrappers.append(self._check)
            session.commit = _guarded_commit(self._refuse_if_revoked, session.commit)

    def uninstall(self) -> None:
        """In the handler's thread, after it ran."""
        if getattr(_on_duty, "guard", None) is self:
            _on_duty.guard = None
        for session in self._adopted:
            if self._check in session.execute_wrappers:
                session.execute_wrappers.remove(self._check)
            vars(session).pop("commit", None)
        self._adopted = []

    def _refuse_if_revoked(self) -> None:
        if self.revoked:
            raise AttemptRevoked(
                f"job {self.job_id}: this Attempt was given up (timed out, lost its lease, or shut down); "
                "its handler may not use the database any more"
            )

    def _check(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self._refuse_if_revoked()
        return execute(sql, params, many, context)

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


class _Unguarded(DatabaseGuard):
    """The guard of an Attempt nothing can give up (the test pump's, run inline): it installs nothing."""

    def install(self) -> None:
        """Nothing to guard."""

    def uninstall(self) -> None:
        """Nothing was installed."""


UNGUARDED = _Unguarded(0)

#: Per worker thread: ``guard``, the guard of the Attempt it runs (None between Attempts), and ``sessions``,
#: its connection wrappers, watched since its first Attempt.
_on_duty = threading.local()


def _watched_sessions() -> list[Any]:
    """This thread's connection wrappers, watched by :func:`_check_on_duty` (hooked at the first call)."""
    sessions: list[Any] | None = getattr(_on_duty, "sessions", None)
    if sessions is None:
        sessions = _on_duty.sessions = list(connections.all())
        for session in sessions:
            session.execute_wrappers.append(_check_on_duty)
            session.commit = _guarded_commit(_refuse_if_duty_revoked, session.commit)
    return sessions


def _refuse_if_duty_revoked() -> None:
    guard: DatabaseGuard | None = getattr(_on_duty, "guard", None)
    if guard is not None:
        guard._refuse_if_revoked()


def _check_on_duty(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
    _refuse_if_duty_revoked()
    return execute(sql, params, many, context)


def _guarded_commit(refuse: Callable[[], None], commit: Callable[[], None]) -> Callable[[], None]:
    """``commit`` behind ``refuse`` (Django sends COMMIT past the execute wrappers)."""

    def guarded() -> None:
        refuse()
        commit()

    return guarded


@value
class AttemptResult:
    """How the handler call ended: ``error`` is None on success, and ``value`` what it returned; ``message``,
    ``detail`` (the traceback) and ``error_type`` (the exception's class) are storable."""

    error: BaseException | None = None
    message: str = ""
    detail: str = ""
    error_type: str = ""
    value: Any = None
    output: str | None = None  # the value, encoded (by the executor)

    @classmethod
    def failed(cls, error: BaseException) -> AttemptResult:
        return cls(
            error=error, message=describe(error), detail=format_traceback(error), error_type=class_path(error)
        )


def class_path(error: BaseException) -> str:
    """``module.QualifiedName`` of the exception's class (as Django's ``TaskError`` records); never raises."""
    kind = type(error)
    module, name = getattr(kind, "__module__", None), getattr(kind, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        return describe(error).split(":", 1)[0]
    return f"{module}.{name}"  # builtins too: Django's TaskError imports the class by this path


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
        "work never ran: was it meant to be async? Declare the handler with async def, or run the async "
        "work inside it (asyncio.run(...)) and return its result"
    )


def call_handler(registration: JobRegistration, arguments: dict[str, Any], context: JobContext) -> Any:
    """Call the handler in this thread and return what it returned. An ``async def`` handler's coroutine is
    run to its end on an event loop of its own (the test pump's way; the Pump runs them on its loop)."""
    value = registration.execute(arguments, context)
    if registration.is_async and inspect.isawaitable(value):
        return async_to_sync(_awaited)(value)
    refuse_awaitable(registration, value)
    return value


async def _awaited(value: Any) -> Any:
    return await value


def close_connections(*, close_all: bool = False) -> None:
    """After an Attempt: roll back what the handler left open, then close as Django does after a request, or
    close every connection (``close_all``: the Attempt was revoked and the store has cut them off, or its
    thread ends with it)."""
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
            if close_all:
                conn.close()
            else:
                conn.close_if_unusable_or_obsolete()
        except Exception:
            logger.exception("closing connection %r after an Attempt failed; closing it hard", conn.alias)
            conn.close()


def keep_connections(*, close_all: bool = False) -> None:
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
    observed = telemetry.attempt_started(context)
    try:
        with isolation():
            result = AttemptResult(value=_call(registration, arguments, context))
    except BaseException as exc:  # the handler's failure is an outcome, not a crash of the pump
        result = AttemptResult.failed(exc)
    finally:
        try:
            _send_finished(registration, context)
        finally:
            telemetry.attempt_finished(observed, result)
            guard.uninstall()
            release(close_all=guard.revoked)
    return result


def _call(registration: JobRegistration, arguments: dict[str, Any], context: JobContext) -> Any:
    """``attempt_started``, the handler, then the scope's clean-ups (always); returns what the handler
    returned, or raises what failed first. A clean-up that fails is logged, and fails the Attempt only if
    nothing failed before it."""
    failure: BaseException | None = None
    value = None
    try:
        attempt_started.send(sender=registration, context=context)
        value = call_handler(registration, arguments, context)
    except BaseException as exc:
        failure = exc
    closing = _close_scope(context)  # always, whatever the handler did
    failure = failure or closing
    if failure is not None:
        raise failure
    return value


def _close_scope(context: JobContext) -> BaseException | None:
    """Close what the handler registered on its scope, last first; what a clean-up raised, logged."""
    try:
        context.scope.close()
    except BaseException as exc:
        logger.error("a clean-up registered by job %s failed: %s", context.job_id, describe(exc))
        return exc
    return None


def _send_finished(registration: JobRegistration, context: JobContext) -> None:
    for receiver, error in attempt_finished.send_robust(sender=registration, context=context):
        if isinstance(error, Exception):
            logger.error("an attempt_finished receiver (%r) raised: %s", receiver, describe(error))


#: The guard of the async Attempt whose code is running (a context variable: sync_to_async carries it into
#: the Attempt's thread, where ``connection_created`` reads it).
_current_guard: contextvars.ContextVar[DatabaseGuard | None] = contextvars.ContextVar(
    "backwave_attempt_guard", default=None
)


def _guard_new_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    guard = _current_guard.get()
    if guard is not None:
        guard.adopt(connection)


connection_created.connect(_guard_new_connection, dispatch_uid="backwave_async_attempt_guard")


async def run_attempt_async(
    registration: JobRegistration, arguments: dict[str, Any], context: JobContext, guard: DatabaseGuard
) -> AttemptResult:
    """Run one ``async def`` handler call inside a fresh scope on the running event loop; never raises.

    Cancelling the task running it (an operator's cancel, a timeout, the shutdown) raises CancelledError
    inside the handler, which ends the Attempt like any exception."""
    result = AttemptResult()
    token = _current_guard.set(guard)
    try:
        async with ThreadSensitiveContext():  # this Attempt's own thread for sync_to_async, made when used
            try:
                if attempt_started.has_listeners():
                    await sync_to_async(attempt_started.send)(sender=registration, context=context)
                result = AttemptResult(value=await registration.execute(arguments, context))
            except BaseException as exc:  # CancelledError included: it ends this Attempt, nothing else
                result = AttemptResult.failed(exc)
            if guard.sessions or context.scope.used or attempt_finished.has_listeners():
                result = await sync_to_async(_end_of_async_attempt)(registration, context, result, guard)
    except BaseException as exc:  # a cancel that landed in the clean-up: the Attempt still ends once
        result = result if result.error is not None else AttemptResult.failed(exc)
    finally:
        _current_guard.reset(token)
    return result


def _end_of_async_attempt(
    registration: JobRegistration, context: JobContext, result: AttemptResult, guard: DatabaseGuard
) -> AttemptResult:
    """In the Attempt's own thread: its clean-ups and signal, then its connections closed for good (the
    thread ends with the Attempt: nothing can reuse them)."""
    try:
        failed = _close_scope(context)
        if failed is not None and result.error is None:
            result = AttemptResult.failed(failed)
        _send_finished(registration, context)
        return result
    finally:
        guard.uninstall()
        close_connections(close_all=True)
