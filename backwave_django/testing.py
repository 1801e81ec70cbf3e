"""The deterministic test pump: the production Node Driver against the real store, on a virtual clock.

Handlers run inline in the calling thread (no threads, no sleeping, no per-Attempt connection clean-up, so
they see the test's transaction). Time moves only when you say so::

    from backwave_django.testing import TestPump

    def test_retry_then_success(db):
        flaky.enqueue(n=1)
        with TestPump() as pump:
            pump.run_due()                          # attempt 1 fails
            pump.advance(timedelta(seconds=2))      # the backoff passes; attempt 2 succeeds
        assert Job.objects.get().state == Job.State.SUCCEEDED

Its scheduling decisions are the production Pump's, because both obey the same Driver. With pytest, the
``backwave_pump`` fixture gives a fresh one (and the ``db`` fixture).
"""

from __future__ import annotations

import traceback
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from . import codec, conf
from .context import JobContext
from .core import commands as cmd
from .core import events as ev
from .core.dispatch import Policy, Strict
from .core.driver import DriverConfig, NodeDriver
from .core.records import ClaimedJob
from .core.retry import RetryPolicy
from .core.states import State
from .registry import Registry, UnknownJob, registry
from .shell.scope import AttemptResult
from .store import get_store

MAX_STEPS = 100_000


@dataclass(frozen=True, slots=True)
class Execution:
    """One handler run the test pump performed: which job, which attempt, and how it ended."""

    job_id: int
    wire_name: str
    attempt: int
    outcome: str  # succeeded, failed or unroutable
    error: BaseException | None = None


class TestPump:
    """A single-threaded pump on a virtual clock. ``now`` moves only through :meth:`advance`."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        queues: Sequence[str] | None = None,
        policy: Policy | None = None,
        start: datetime | None = None,
        worker_id: str = "test-node",
        pool_size: int = 20,
        max_claim_batch: int = 32,
        lease_duration: timedelta = timedelta(minutes=1),
        retry: RetryPolicy | None = None,
        registry: Registry = registry,
        using: str | None = None,
    ) -> None:
        settings = conf.get()
        if policy is not None:
            queues = policy.served_queues
        elif queues is None:
            queues = sorted({*(r.queue for r in registry.all()), *settings.served_queues(), "default"})
        self.queues = tuple(queues)
        self._now = start or timezone.now()
        self._follows_wall_clock = start is None
        self.worker_id = worker_id
        self.registry = registry
        self.store = get_store(using or settings.database)
        self.driver = NodeDriver(
            DriverConfig(
                policy=policy or Strict(self.queues),
                pool_size=pool_size,
                max_claim_batch=max_claim_batch,
                lease_duration=lease_duration,
                maintenance_interval=timedelta(0),
                retry=retry or settings.retry,
            )
        )
        self.executions: list[Execution] = []
        self._details: dict[int, str] = {}

    @property
    def now(self) -> datetime:
        """Virtual time. Without an explicit ``start`` it never lags the wall clock, so a job the test has
        just enqueued (stamped with the real time) is due at once."""
        if self._follows_wall_clock:
            self._now = max(self._now, timezone.now())
        return self._now

    @now.setter
    def now(self, value: datetime) -> None:
        self._now = value

    def __enter__(self) -> TestPump:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    # -- driving -------------------------------------------------------------------------------------

    def run_due(self) -> list[Execution]:
        """Expire lapsed leases, then claim and run everything due at ``now`` until nothing more is."""
        before = len(self.executions)
        self._drive(
            [ev.MaintenanceDue(now=self.now), ev.PollDue(now=self.now), ev.HeartbeatDue(now=self.now)]
        )
        return self.executions[before:]

    def advance(self, by: timedelta) -> list[Execution]:
        """Move virtual time forward by ``by``, stopping at every due time and lease expiry on the way."""
        return self.advance_to(self.now + by)

    def advance_to(self, target: datetime) -> list[Execution]:
        if target < self.now:
            raise ValueError(f"virtual time only moves forward: {target} is before {self.now}")
        before = len(self.executions)
        self.run_due()
        while (upcoming := self.next_activity()) is not None and upcoming <= target:
            self.now = max(upcoming, self.now)
            self.run_due()
        self.now = target
        self.run_due()
        return self.executions[before:]

    def next_activity(self) -> datetime | None:
        """The earliest future due time or lease expiry in the served queues, or None."""
        now = self.now
        jobs = self._queryset("Job").filter(state=State.SCHEDULED, queue__in=self.queues, due_at__gt=now)
        leases = self._queryset("Lease").filter(queue__in=self.queues, expires_at__gt=now)
        times = [jobs.aggregate(t=Min("due_at"))["t"], leases.aggregate(t=Min("expires_at"))["t"]]
        present = [t for t in times if t is not None]
        return min(present) if present else None

    def _queryset(self, model: str) -> Any:
        from . import models

        return getattr(models, model).objects.using(self.store.using)

    def _drive(self, first: Sequence[ev.Event]) -> None:
        fifo: deque[ev.Event] = deque(first)
        steps = 0
        while fifo:
            steps += 1
            if steps > MAX_STEPS:
                raise RuntimeError(
                    "the test pump did not settle; a job keeps becoming due at the same instant"
                )
            for command in self.driver.step(fifo.popleft()):
                fifo.extend(self._obey(command))

    def _obey(self, command: cmd.Command) -> list[ev.Event]:
        store, now = self.store, self.now
        match command:
            case cmd.ClaimBatch(queues=queues, max_jobs=max_jobs, lease_duration=lease):
                jobs = store.claim(
                    worker_id=self.worker_id, queues=queues, max_jobs=max_jobs, lease_duration=lease, now=now
                )
                return [ev.ClaimCompleted(now=now, jobs=tuple(jobs))]
            case cmd.ExecuteJob(job=job):
                return [self._execute(job)]
            case cmd.ReportOutcomes(reports=reports):
                details = {
                    r.job_id: self._details.pop(r.job_id) for r in reports if r.job_id in self._details
                }
                result = store.report(worker_id=self.worker_id, reports=reports, now=now, details=details)
                return [ev.OutcomesReported(now=now, applied=result.applied, stale=result.stale)]
            case cmd.Heartbeat(job_ids=job_ids, lease_duration=lease):
                results = store.heartbeat(
                    worker_id=self.worker_id, job_ids=job_ids, lease_duration=lease, now=now
                )
                return [ev.HeartbeatCompleted(now=now, results=tuple(results))]
            case cmd.ExpireLeases(queues=queues, max_jobs=max_jobs, retry=retry):
                return [
                    ev.LeasesExpired(
                        now=now,
                        count=store.expire_leases(queues=queues, max_jobs=max_jobs, retry=retry, now=now),
                    )
                ]
            case cmd.ReleaseLeases(job_ids=job_ids):
                store.release(worker_id=self.worker_id, job_ids=job_ids, now=now)
                return [ev.LeasesReleased(now=now)]
            case cmd.RequestPoll():
                return [ev.PollDue(now=now)]
            case _:  # SignalCancellation, AbandonExecution, Stop: nothing runs concurrently here
                return []

    def _execute(self, job: ClaimedJob) -> ev.Event:
        now = self.now
        try:
            registration = self.registry.get(job.wire_name)
            arguments = registration.decode(job.payload)
        except (UnknownJob, codec.PayloadDecodeError) as exc:
            self.executions.append(Execution(job.id, job.wire_name, job.attempt, "unroutable", exc))
            return ev.ExecutionUnroutable(now=now, job_id=job.id, reason=str(exc))
        context = JobContext(
            job_id=job.id, attempt=job.attempt, wire_name=job.wire_name, queue=job.queue,
            max_attempts=job.max_attempts, worker_id=self.worker_id,
        )  # fmt: skip
        try:
            # A savepoint per handler: a handler that breaks the transaction (an IntegrityError on
            # PostgreSQL, say) fails its Attempt without poisoning the test's own transaction.
            with transaction.atomic(using=self.store.using):
                try:
                    registration.execute(arguments, context)
                finally:
                    context.scope.close()
        except Exception as exc:
            self.executions.append(Execution(job.id, job.wire_name, job.attempt, "failed", exc))
            result = AttemptResult(error=exc, detail="".join(traceback.format_exception(exc)))
            self._details[job.id] = result.detail
            return ev.ExecutionFailed(now=now, job_id=job.id, message=result.message)
        self.executions.append(Execution(job.id, job.wire_name, job.attempt, "succeeded"))
        return ev.ExecutionSucceeded(now=now, job_id=job.id)
