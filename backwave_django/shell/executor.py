"""The executor: turns a claimed job into exactly one Execution event, whatever its handler does.

The Pump and the test pump share it. :meth:`Executor.prepare` routes the job (its wire name to a handler)
and decodes its arguments; a job that cannot be routed becomes ``ExecutionUnroutable`` at once and never
reaches a handler. :meth:`Executor.run` runs a prepared Attempt through a runner (the Pump's per-Attempt
scope in a worker thread, or the test pump's savepoint) and returns ``ExecutionSucceeded`` or
``ExecutionFailed``; it never raises, and an Attempt the Pump has abandoned meanwhile returns None (its lease
is gone, and so is its result). :meth:`Executor.run_async` does the same for an ``async def`` handler, on the
Pump's event loop. A return value is encoded here, in the handler's thread, by the payload's rules and bound
(``MAX_OUTPUT_BYTES``): one that cannot be stored fails its Attempt with a cause that says why. What each
ended Attempt leaves for its outcome (traceback, exception class, return value) waits here, keyed by (job,
attempt), until the outcome is written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..codec import PayloadDecodeError, PayloadError, encode_value
from ..context import JobContext, StopSignal
from ..core import events as ev
from ..core.records import ClaimedJob, OutcomeReport
from ..core.text import clean, describe
from ..registry import JobRegistration, Registry, UnknownJob
from ..store.contract import OutcomeDetail
from .scope import AttemptResult, DatabaseGuard

logger = logging.getLogger("backwave.pump")

#: How a runner calls a handler: never raises, and returns how the call ended.
Runner = Callable[[JobRegistration, dict[str, Any], JobContext, DatabaseGuard], AttemptResult]
AsyncRunner = Callable[
    [JobRegistration, dict[str, Any], JobContext, DatabaseGuard], Coroutine[Any, Any, AttemptResult]
]
#: A handler's return value, encoded, in bytes (BACKWAVE['MAX_OUTPUT_BYTES'] by default).
DEFAULT_MAX_OUTPUT_BYTES = 65536


class OutputError(ValueError):
    """A handler's return value cannot be stored: the Attempt fails with this as its cause."""


@dataclass(slots=True, eq=False)
class Attempt:
    """One claimed job on its way through a handler."""

    job: ClaimedJob
    registration: JobRegistration
    arguments: dict[str, Any]
    context: JobContext
    token: StopSignal
    guard: DatabaseGuard
    cut_off_at: datetime | None = None  # when the Driver gives it up if it still runs (its time limit)
    abandoned: bool = field(default=False)
    task: concurrent.futures.Future[Any] | None = None  # an async Attempt's handle on the event loop

    def stop(self) -> None:
        """Ask the handler to stop: ``context.cancelled`` becomes true, and an async one is cancelled."""
        self.token.set()
        if self.task is not None:
            self.task.cancel()


def unroutable_reason(exc: Exception) -> str:
    """Why a job cannot be routed, in words that name the problem but never the payload's values."""
    if isinstance(exc, UnknownJob | PayloadDecodeError):
        return clean(_safe_first_line(exc))
    return f"its payload could not be decoded ({type(exc).__name__})"


def _safe_first_line(exc: Exception) -> str:
    lines = describe(exc).split(": ", 1)
    return lines[-1]


class Executor:
    def __init__(
        self,
        registry: Registry,
        worker_id: str,
        clock: Callable[[], datetime],
        runner: Runner,
        *,
        async_runner: AsyncRunner | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        self.registry = registry
        self.worker_id = worker_id
        self.clock = clock
        self.runner = runner
        self.async_runner = async_runner
        self.max_output_bytes = max_output_bytes
        self._lock = threading.Lock()
        self._inflight: dict[int, Attempt] = {}
        self._details: dict[tuple[int, int], OutcomeDetail] = {}

    def prepare(
        self, job: ClaimedJob, cut_off_at: datetime | None = None
    ) -> Attempt | ev.ExecutionUnroutable:
        """Route and decode the job. Anything that goes wrong on the way makes it unroutable, never raises."""
        try:
            registration = self.registry.get(job.wire_name)
            arguments = registration.decode(job.payload)
        except Exception as exc:  # an unknown name, a payload that no longer decodes or fits
            return ev.ExecutionUnroutable(now=self.clock(), job_id=job.id, reason=unroutable_reason(exc))
        token = StopSignal()
        context = JobContext(
            job_id=job.id,
            attempt=job.attempt,
            wire_name=job.wire_name,
            queue=job.queue,
            max_attempts=job.max_attempts,
            worker_id=self.worker_id,
            cancelled=token,
            scheduled_for=job.scheduled_for,
            enqueued_at=job.created_at,
            due_at=job.due_at,
            trace_context=job.trace_context,
        )
        attempt = Attempt(job, registration, arguments, context, token, DatabaseGuard(job.id), cut_off_at)
        with self._lock:
            self._inflight[job.id] = attempt
        return attempt

    def run(self, attempt: Attempt) -> ev.Event | None:
        """Run the handler once; the event that says how it ended, or None if the Attempt was abandoned."""
        if attempt.abandoned:
            return None
        try:
            result = self.runner(attempt.registration, attempt.arguments, attempt.context, attempt.guard)
        except BaseException as exc:  # a runner never raises; if one does, the Attempt still ends once
            result = AttemptResult.failed(exc)
        return self._ended(attempt, result)

    async def run_async(self, attempt: Attempt) -> ev.Event | None:
        """:meth:`run` for an ``async def`` handler, on the running event loop."""
        if attempt.abandoned:
            return None
        try:
            if self.async_runner is None:
                raise RuntimeError("this executor runs no async handlers")
            args = (attempt.registration, attempt.arguments, attempt.context, attempt.guard)
            result = await self.async_runner(*args)
        except BaseException as exc:
            result = AttemptResult.failed(exc)
        return self._ended(attempt, result)

    def _ended(self, attempt: Attempt, result: AttemptResult) -> ev.Event | None:
        job = attempt.job
        if result.error is None:
            result = self._with_output(attempt, result)
        elif isinstance(result.error, asyncio.CancelledError) and attempt.token.is_set():
            # An async handler cancelled because it was asked to stop: why it stopped (its time limit, an
            # operator, the shutdown) is the Driver's to say, as for a handler that stopped on its own.
            result = replace(result, detail="", error_type="")
        with self._lock:
            ours = self._inflight.get(job.id) is attempt
            if ours:
                del self._inflight[job.id]
        if not ours:
            return None
        now = self.clock()
        tags = attempt.context.added_tags  # written with whatever outcome this Attempt gets
        if result.error is None:
            if result.output is not None or tags:
                self._details[job.id, job.attempt] = OutcomeDetail(output=result.output, tags=tags)
            return ev.ExecutionSucceeded(now=now, job_id=job.id)
        self._details[job.id, job.attempt] = OutcomeDetail(
            traceback=result.detail, error_type=result.error_type, tags=tags
        )
        logger.warning(
            "job %s (%s) attempt %d/%d failed: %s",
            job.id, job.wire_name, job.attempt, job.max_attempts, result.message,
        )  # fmt: skip
        return ev.ExecutionFailed(now=now, job_id=job.id, message=result.message)

    def _with_output(self, attempt: Attempt, result: AttemptResult) -> AttemptResult:
        """The result with its return value encoded, or failed with OutputError when it cannot be stored."""
        if result.value is None:
            return result
        try:
            output = encode_value(result.value)
            size = len(output.encode("utf-8"))
            if size > self.max_output_bytes:
                raise OutputError(
                    f"the return value is {size} bytes encoded; the limit is {self.max_output_bytes} "
                    "(BACKWAVE['MAX_OUTPUT_BYTES']). Store large results elsewhere and return a reference."
                )
        except (PayloadError, OutputError) as exc:
            return AttemptResult.failed(OutputError(f"{attempt.registration.wire_name}: {exc}"))
        except Exception as exc:  # a value whose own methods raise while it is encoded
            failure = OutputError(f"the return value could not be encoded ({type(exc).__name__})")
            return AttemptResult.failed(failure)
        return replace(result, output=output)

    def in_flight(self, attempt: Attempt) -> bool:
        """Whether this Attempt still runs and is still awaited (not ended, not abandoned)."""
        with self._lock:
            return self._inflight.get(attempt.job.id) is attempt

    def signal(self, job_id: int) -> None:
        """Ask a running handler to stop: ``context.cancelled`` becomes true (an async one is cancelled)."""
        with self._lock:
            attempt = self._inflight.get(job_id)
        if attempt is not None:
            attempt.stop()

    def abandon(self, job_id: int) -> Attempt | None:
        """Stop waiting for a handler: its result will be dropped. Returns the Attempt if it was in flight."""
        with self._lock:
            attempt = self._inflight.pop(job_id, None)
            if attempt is not None:
                attempt.abandoned = True
        if attempt is not None:
            attempt.context._give_up()
            attempt.stop()
        return attempt

    def details_for(self, reports: Sequence[OutcomeReport]) -> dict[int, OutcomeDetail]:
        """What these reports' Attempts left for their outcomes (tracebacks, return values), by job id."""
        # Two Attempts of one job can share a batch (a report believed lost, sent again after a new claim):
        # the later Attempt's detail wins, so a fenced-off Attempt's tags or value never ride on the other's.
        ordered = sorted(reports, key=lambda r: r.attempt)
        found = ((r.job_id, self._details.get((r.job_id, r.attempt))) for r in ordered)
        return {job_id: detail for job_id, detail in found if detail is not None}

    def forget_details(self, reports: Sequence[OutcomeReport]) -> None:
        for report in reports:
            self._details.pop((report.job_id, report.attempt), None)

    def running(self) -> list[Attempt]:
        with self._lock:
            return list(self._inflight.values())

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._inflight)
