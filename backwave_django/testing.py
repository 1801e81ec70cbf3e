"""The deterministic test pump: the production Node Driver against the real store, on a virtual clock.

Handlers run inline in the calling thread (no threads, no sleeping, no per-Attempt connection clean-up, so
they see the test's transaction), each in a savepoint of its own, through the Pump's per-Attempt steps
(``attempt_started``, the handler, its clean-ups, ``attempt_finished``). Time moves only when you say so::

    from backwave_django.testing import TestPump

    def test_retry_then_success(db):
        flaky.enqueue(n=1)
        with TestPump() as pump:
            pump.run_due()                          # attempt 1 fails
            pump.advance(timedelta(seconds=2))      # the backoff passes; attempt 2 succeeds
        assert Job.objects.get().state == Job.State.SUCCEEDED

Its scheduling decisions are the production Pump's, because both obey the same Driver through the same
command runner and executor. With pytest, the ``backwave_pump`` fixture gives a fresh one (and the ``db``
fixture).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from . import conf, signals
from .context import JobContext
from .core import events as ev
from .core.dispatch import Policy, Strict
from .core.driver import DriverConfig, NodeDriver
from .core.records import ClaimedJob
from .core.retention import RetentionRule
from .core.retry import RetryPolicy
from .core.schedules import Walkers
from .registry import JobRegistration, Registry, registry
from .schedules import sync as sync_schedules
from .shell.executor import Attempt, Executor
from .shell.pump import misfire_grace
from .shell.runner import CommandRunner
from .shell.scope import UNGUARDED, AttemptResult, DatabaseGuard, keep_connections, run_attempt
from .store import get_store
from .store.contract import JobStore
from .store.memory import MemoryStore

MAX_STEPS = 100_000
#: The events :meth:`TestPump._record` keeps a note of.
_RECORDED = frozenset({ev.ClaimCompleted, ev.ExecutionSucceeded, ev.ExecutionFailed, ev.ExecutionUnroutable})


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
        worker_id: str = "test-node:0:test",
        pool_size: int | None = None,
        max_claim_batch: int | None = None,
        lease_duration: timedelta | None = None,
        retry: RetryPolicy | None = None,
        registry: Registry = registry,
        using: str | None = None,
        store: JobStore | None = None,
        retention: tuple[RetentionRule, ...] = (),
        schedules: bool = True,
    ) -> None:
        settings = conf.get()
        defaults = conf.default_group_settings()
        if policy is not None:
            queues = policy.served_queues
        elif queues is None:
            queues = sorted({*(r.queue for r in registry.all()), *settings.served_queues(), "default"})
        self.queues = tuple(queues)
        self._now = start or timezone.now()
        self._follows_wall_clock = start is None
        self.worker_id = worker_id
        self.registry = registry
        self.store = store or get_store(using or settings.database)
        if isinstance(self.store, MemoryStore) and self.store.announce is None:
            self.store.announce = signals.Announcer(MemoryStore)  # job_transitioned, as the database stores
        batch = max_claim_batch or defaults.max_claim_batch
        self.driver = NodeDriver(
            DriverConfig(
                policy=policy or Strict(self.queues),
                pool_size=pool_size or defaults.pool_size,
                max_claim_batch=batch,
                max_outcome_batch=batch,
                lease_duration=lease_duration or defaults.lease_duration,
                maintenance_interval=timedelta(0),
                retry=retry or settings.retry,
                timeout=None,  # handlers run inline: virtual time never moves while one runs
                retention=retention,  # none unless asked: a test reads the jobs it ran
                misfire_grace=misfire_grace(defaults.maintenance_interval),
            )
        )
        #: Every handler run so far, oldest first.
        self.executions: list[Execution] = []
        self._errors: dict[int, BaseException] = {}
        self._claimed: dict[int, ClaimedJob] = {}
        self._claims = 0  # claims answered so far
        self._walkers = Walkers()
        self._fifo: deque[ev.Event] = deque()
        self.executor = Executor(
            registry, worker_id, self._clock, self._run, max_output_bytes=settings.max_output_bytes
        )
        if schedules:  # BACKWAVE['SCHEDULES'], as a worker starting now would store them
            sync_schedules(self.store, settings, registry, now=self._now)
        self.runner = CommandRunner(
            store=self.store,
            worker_id=worker_id,
            group="test",
            queues=self.queues,
            started_at=self._now,
            executor=self.executor,
            host=self,
            clock=self._clock,
            raise_faults=True,
        )

    @property
    def now(self) -> datetime:
        """Virtual time. Without an explicit ``start`` it never lags the wall clock, so a job the test has
        just enqueued (stamped with the real time) is due at once."""
        return self._clock()

    @now.setter
    def now(self, value: datetime) -> None:
        self._now = value

    def _clock(self) -> datetime:
        """``now``, as the runner and the executor read it (twice a command: one call, not two)."""
        if self._follows_wall_clock:
            self._now = max(self._now, timezone.now())
        return self._now

    def __enter__(self) -> TestPump:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    # -- driving -------------------------------------------------------------------------------------

    def run_due(self) -> list[Execution]:
        """Expire lapsed leases, then claim and run everything due at ``now`` until nothing more is."""
        before, claims = len(self.executions), self._claims
        now = self.now
        # The sweep runs only when a lease has lapsed (a test pump can look; the Pump cannot). Handlers run
        # inline, so between two calls nothing runs: a heartbeat has leases to renew (and a status to record)
        # only if something was left held, which a fault would have raised first.
        expiry = self.store.next_lease_expiry(self.queues)
        lapsed = expiry is not None and expiry <= now
        first: list[ev.Event] = [ev.MaintenanceDue(now=now, leases_lapsed=lapsed)]
        self._drive(first if self.driver.idle else [*first, ev.HeartbeatDue(now=now)])
        if self._claims == claims:  # maintenance minted or released nothing that asked for a poll
            self._drive([ev.PollDue(now=now)])
        return self.executions[before:]

    def advance(self, by: timedelta) -> list[Execution]:
        """Move virtual time forward by ``by``, stopping at every due time and lease expiry on the way."""
        return self.advance_to(self.now + by)

    def advance_to(self, target: datetime) -> list[Execution]:
        """Move virtual time forward to ``target`` (an aware datetime), as :meth:`advance` does."""
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
        """The earliest future due time, lease expiry or schedule tick in the served queues, or None."""
        now = self.now
        times = [self.store.upcoming(self.queues, after=now)]
        times += [
            view.next_run(self._walkers)
            for view in self.store.list_schedules()
            if view.definition.queue in self.queues
        ]
        present = [t for t in times if t is not None]
        return min(present) if present else None

    def _drive(self, first: Sequence[ev.Event]) -> None:
        self._fifo.extend(first)
        steps = 0
        while self._fifo:
            steps += 1
            if steps > MAX_STEPS:
                raise RuntimeError(
                    "the test pump did not settle; a job keeps becoming due at the same instant"
                )
            event = self._fifo.popleft()
            self._record(event)
            self._fifo.extend(self.runner.run(self.driver.step(event)))

    def _record(self, event: ev.Event) -> None:
        if type(event) not in _RECORDED:
            return  # most events: a set lookup, not a check per case below
        match event:
            case ev.ClaimCompleted(jobs=jobs):
                self._claims += 1
                self._claimed.update((job.id, job) for job in jobs)
            case ev.ExecutionSucceeded(job_id=job_id):
                self._executed(job_id, "succeeded")
            case ev.ExecutionFailed(job_id=job_id):
                self._executed(job_id, "failed", self._errors.pop(job_id, None))
            case ev.ExecutionUnroutable(job_id=job_id, reason=reason):
                self._executed(job_id, "unroutable", LookupError(reason))

    def _executed(self, job_id: int, outcome: str, error: BaseException | None = None) -> None:
        job = self._claimed.pop(job_id)
        self.executions.append(Execution(job_id, job.wire_name, job.attempt, outcome, error))

    def _run(
        self,
        registration: JobRegistration,
        arguments: dict[str, Any],
        context: JobContext,
        guard: DatabaseGuard,
    ) -> AttemptResult:
        """The Pump's per-Attempt steps (signals, handler, clean-ups), each Attempt in a savepoint of its own
        and the test's connection left open. Nothing can give an inline Attempt up, so none is guarded."""
        result = run_attempt(
            registration, arguments, context, UNGUARDED, isolation=self._savepoint, release=keep_connections
        )
        if result.error is not None:
            self._errors[context.job_id] = result.error
        return result

    def _savepoint(self) -> AbstractContextManager[Any]:
        """A savepoint on the store's database, so a handler that breaks the transaction (an IntegrityError on
        PostgreSQL, say) fails its Attempt without poisoning the test's own; none for a store without a
        database (the memory store)."""
        if self.store.using in connections.settings:
            return transaction.atomic(using=self.store.using)
        return nullcontext()

    # -- what the runner asks of its host ---------------------------------------------------------------

    def launch(self, attempt: Attempt) -> None:
        event = self.executor.run(attempt)
        if event is not None:
            self._fifo.append(event)

    def request_poll(self) -> None:
        self._fifo.append(ev.PollDue(now=self._clock()))

    def wake_at(self, at: datetime) -> None:
        """Nothing to wake: the test pump has no timers that matter while handlers run inline."""

    def abandoned(self, attempt: Attempt) -> None:
        """Nothing runs beside the test pump, so nothing is left behind."""

    def halt(self, reason: str) -> None:
        raise RuntimeError(f"the test pump halted: {reason}")

    def stop(self) -> None:
        """The test pump is never shut down."""
