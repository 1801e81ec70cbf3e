"""JobContext: what a running handler knows about its Attempt, and the per-Attempt scope it can use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from datetime import datetime
from typing import Any, TypeVar

from .core.tags import MAX_TAGS_PER_JOB, TagError, normalise

T = TypeVar("T")


class JobCancelled(Exception):
    """Raised by :meth:`JobContext.raise_if_cancelled` once the job has been asked to stop."""


class NoOutput(LookupError):
    """:meth:`JobContext.output_of` was asked for a job that has no output to give: it no longer exists
    (retention purged it) or has not succeeded."""


class AttemptScope:
    """Resources that live exactly as long as one Attempt, released when it ends (in reverse order).

    ``callback(fn)`` runs ``fn`` at the end; ``enter_context(cm)`` enters a context manager now and exits it
    at the end; ``resource(factory)`` builds a value once per Attempt (the first time it is asked for) and,
    if the value is a context manager or has ``close()``, disposes of it at the end.
    """

    def __init__(self) -> None:
        # Made when something is first registered: most Attempts register nothing, and an ExitStack and a
        # dict made for each of them were 2 % of a worker's CPU in a drain of noop jobs.
        self._stack: ExitStack | None = None
        self._resources: dict[Callable[[], Any], Any] | None = None
        self.used = False  #: something was registered: closing it is more than a no-op

    def _used(self) -> ExitStack:
        self.used = True
        if self._stack is None:
            self._stack = ExitStack()
        return self._stack

    def callback(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        self._used().callback(fn, *args, **kwargs)

    def enter_context(self, manager: AbstractContextManager[T]) -> T:
        return self._used().enter_context(manager)

    def resource(self, factory: Callable[[], T]) -> T:
        stack = self._used()
        if self._resources is None:
            self._resources = {}
        if factory not in self._resources:
            value = factory()
            if isinstance(value, AbstractContextManager):
                value = stack.enter_context(value)
            elif callable(getattr(value, "close", None)):
                stack.callback(value.close)  # type: ignore[attr-defined]
            self._resources[factory] = value
        return self._resources[factory]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Release everything registered, last first. Called by the Pump when the Attempt ends."""
        if self._resources is not None:
            self._resources.clear()
        if self._stack is not None:
            self._stack.close()


class StopSignal:
    """Whether an Attempt was asked to stop: set by the Pump (from its own thread), read or waited on by the
    handler, as a ``threading.Event`` is. The Event itself is made only when someone waits, which few handlers
    do: building one for every Attempt was a tenth of what the Pump spends preparing it."""

    __slots__ = ("_event", "_lock", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            self._set = True
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        with self._lock:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


class JobContext:
    """The running Attempt: which job, which attempt, and a cancellation signal to honour.

    Handlers receive it through a parameter annotated ``JobContext`` (or named ``context``).
    """

    __slots__ = (
        "_cancelled",
        "_given_up",
        "_tags",
        "attempt",
        "due_at",
        "enqueued_at",
        "job_id",
        "max_attempts",
        "queue",
        "scheduled_for",
        "scope",
        "trace_context",
        "wire_name",
        "worker_id",
    )

    def __init__(
        self,
        *,
        job_id: int,
        attempt: int,
        wire_name: str,
        queue: str,
        max_attempts: int,
        worker_id: str = "",
        cancelled: threading.Event | StopSignal | None = None,
        scheduled_for: datetime | None = None,
        enqueued_at: datetime | None = None,
        due_at: datetime | None = None,
        trace_context: str = "",
    ) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.wire_name = wire_name
        self.queue = queue
        self.max_attempts = max_attempts
        self.worker_id = worker_id
        self.scheduled_for = scheduled_for  # the tick a schedule minted this job for, else None
        self.enqueued_at = enqueued_at  # when the job was enqueued
        self.due_at = due_at  # when this Attempt became due (enqueue, run_after, or its retry's backoff)
        self.trace_context = trace_context  # the W3C trace context it was enqueued in, as JSON; "" if none
        self.scope = AttemptScope()
        self._cancelled = cancelled or StopSignal()
        self._given_up = False
        self._tags: set[str] = set()

    @property
    def cancelled(self) -> bool:
        """True once the job should stop: an operator cancelled it, its lease was lost, or shutdown."""
        return self._cancelled.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, waking early if cancelled. Returns whether it was cancelled."""
        return self._cancelled.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise JobCancelled(f"job {self.job_id} was asked to stop")

    @property
    def given_up(self) -> bool:
        """True once the Pump has given this Attempt up (past its time limit, its lease lost, the shutdown):
        whatever the handler does from then on is not its outcome."""
        return self._given_up

    def _give_up(self) -> None:
        self._given_up = True
        self._cancelled.set()

    def add_tag(self, tag: str | tuple[str, str]) -> None:
        """Tag the job: a label ``"urgent"`` or a keyed tag ``("tenant", "acme")``. Written with this
        Attempt's outcome (whatever it is) and only if the Attempt still holds its lease then; a tag the job
        has already is no change. A bad tag raises :class:`~backwave_django.core.tags.TagError` at once."""
        stored = normalise(tag)
        if stored not in self._tags and len(self._tags) >= MAX_TAGS_PER_JOB:
            raise TagError(
                f"an Attempt adds at most {MAX_TAGS_PER_JOB} tags (MAX_TAGS_PER_JOB), not {stored!r}"
            )
        self._tags.add(stored)

    @property
    def added_tags(self) -> tuple[str, ...]:
        """The tags this Attempt added so far, in their stored form, sorted."""
        return tuple(sorted(self._tags))

    def output_of(self, parent: object) -> Any:
        """What ``parent`` (a job, as enqueue returned it, or its id; meant for an ancestor of this job)
        returned, decoded. None when it succeeded and returned None (nothing is stored then). Raises
        :class:`NoOutput` when the job no longer exists (retention purged it) or has not succeeded. Reads
        ``BACKWAVE['DATABASE']``."""
        from . import codec, conf
        from .core.states import State
        from .store import get_store

        job_id = getattr(parent, "id", parent)
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise TypeError(f"output_of takes a job or a job id, got {parent!r}")
        found = get_store(conf.get().database).get_job(job_id)
        if found is None:
            raise NoOutput(f"job {job_id} no longer exists (retention purged it) or never did: no output")
        if found.state is not State.SUCCEEDED:
            raise NoOutput(f"job {job_id} is {found.state}, not succeeded: it has no output")
        return None if found.output is None else codec.decode_value(found.output)

    async def aoutput_of(self, parent: object) -> Any:
        """:meth:`output_of` for an async handler (the read runs in a worker thread)."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.output_of, thread_sensitive=True)(parent)

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    def __repr__(self) -> str:
        return f"<JobContext {self.wire_name} #{self.job_id} attempt {self.attempt}/{self.max_attempts}>"
