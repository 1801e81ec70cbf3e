"""The executor: turns a claimed job into exactly one Execution event, whatever its handler does.

The Pump and the test pump share it. :meth:`Executor.prepare` routes the job (its wire name to a handler)
and decodes its arguments; a job that cannot be routed becomes ``ExecutionUnroutable`` at once and never
reaches a handler. :meth:`Executor.run` runs a prepared Attempt through a runner (the Pump's per-Attempt
scope in a worker thread, or the test pump's savepoint) and returns ``ExecutionSucceeded`` or
``ExecutionFailed``; it never raises, and an Attempt the Pump has abandoned meanwhile returns None (its lease
is gone, and so is its result). Tracebacks of failed Attempts wait here, keyed by (job, attempt), until the
outcome is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..codec import PayloadDecodeError
from ..context import JobContext
from ..core import events as ev
from ..core.records import ClaimedJob, OutcomeReport
from ..core.text import clean, describe
from ..registry import JobRegistration, Registry, UnknownJob
from .scope import AttemptResult, DatabaseGuard

logger = logging.getLogger("backwave.pump")

#: How a runner calls a handler: never raises, and returns how the call ended.
Runner = Callable[[JobRegistration, dict[str, Any], JobContext, DatabaseGuard], AttemptResult]


@dataclass(slots=True, eq=False)
class Attempt:
    """One claimed job on its way through a handler."""

    job: ClaimedJob
    registration: JobRegistration
    arguments: dict[str, Any]
    context: JobContext
    token: threading.Event
    guard: DatabaseGuard
    abandoned: bool = field(default=False)


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
        self, registry: Registry, worker_id: str, clock: Callable[[], datetime], runner: Runner
    ) -> None:
        self.registry = registry
        self.worker_id = worker_id
        self.clock = clock
        self.runner = runner
        self._lock = threading.Lock()
        self._inflight: dict[int, Attempt] = {}
        self._details: dict[tuple[int, int], str] = {}

    def prepare(self, job: ClaimedJob) -> Attempt | ev.ExecutionUnroutable:
        """Route and decode the job. Anything that goes wrong on the way makes it unroutable, never raises."""
        try:
            registration = self.registry.get(job.wire_name)
            arguments = registration.decode(job.payload)
        except Exception as exc:  # an unknown name, a payload that no longer decodes or fits
            return ev.ExecutionUnroutable(now=self.clock(), job_id=job.id, reason=unroutable_reason(exc))
        token = threading.Event()
        context = JobContext(
            job_id=job.id,
            attempt=job.attempt,
            wire_name=job.wire_name,
            queue=job.queue,
            max_attempts=job.max_attempts,
            worker_id=self.worker_id,
            cancelled=token,
            scheduled_for=job.scheduled_for,
            due_at=job.due_at,
            trace_context=job.trace_context,
        )
        attempt = Attempt(job, registration, arguments, context, token, DatabaseGuard(job.id))
        with self._lock:
            self._inflight[job.id] = attempt
        return attempt

    def run(self, attempt: Attempt) -> ev.Event | None:
        """Run the handler once; the event that says how it ended, or None if the Attempt was abandoned."""
        job = attempt.job
        if attempt.abandoned:
            return None
        try:
            result = self.runner(attempt.registration, attempt.arguments, attempt.context, attempt.guard)
        except BaseException as exc:  # a runner never raises; if one does, the Attempt still ends once
            result = AttemptResult.failed(exc)
        with self._lock:
            ours = self._inflight.get(job.id) is attempt
            if ours:
                del self._inflight[job.id]
        if not ours:
            return None
        now = self.clock()
        if result.error is None:
            return ev.ExecutionSucceeded(now=now, job_id=job.id)
        self._details[job.id, job.attempt] = result.detail
        logger.warning(
            "job %s (%s) attempt %d/%d failed: %s",
            job.id, job.wire_name, job.attempt, job.max_attempts, result.message,
        )  # fmt: skip
        return ev.ExecutionFailed(now=now, job_id=job.id, message=result.message)

    def signal(self, job_id: int) -> None:
        """Ask a running handler to stop: its ``context.cancelled`` becomes true."""
        with self._lock:
            attempt = self._inflight.get(job_id)
        if attempt is not None:
            attempt.token.set()

    def abandon(self, job_id: int) -> Attempt | None:
        """Stop waiting for a handler: its result will be dropped. Returns the Attempt if it was in flight."""
        with self._lock:
            attempt = self._inflight.pop(job_id, None)
            if attempt is not None:
                attempt.abandoned = True
        if attempt is not None:
            attempt.token.set()
        return attempt

    def details_for(self, reports: Sequence[OutcomeReport]) -> dict[int, str]:
        """The tracebacks of these reports' Attempts, by job id."""
        found = ((r.job_id, self._details.get((r.job_id, r.attempt), "")) for r in reports)
        return {job_id: detail for job_id, detail in found if detail}

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
