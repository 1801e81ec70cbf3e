"""The Node Driver: every decision one Pump makes, as ``step(event) -> commands``.

It owns claim sizing (Backpressure), dispatch, outcome batching, the retry decision, heartbeats, the
maintenance cadence and the shutdown drain. It performs no I/O and reads no clock: the Shell turns timers,
hints and store replies into events and obeys the commands in the order they are returned.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from . import commands as cmd
from . import events as ev
from .dispatch import PlannedClaim, Policy
from .records import ClaimedJob, OutcomeKind, OutcomeReport
from .retry import RetryPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverConfig:
    """The dials of one Pump. Validated by the settings layer before a Driver is built."""

    policy: Policy
    pool_size: int = 20
    max_claim_batch: int = 32
    max_outcome_batch: int | None = None  # None: the same as max_claim_batch
    lease_duration: timedelta = timedelta(seconds=60)
    maintenance_interval: timedelta = timedelta(seconds=5)
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def outcome_batch(self) -> int:
        return self.max_outcome_batch or self.max_claim_batch


class NodeDriver:
    """A sans-I/O state machine. Feed it events with :meth:`step`; obey what it returns, in order."""

    def __init__(self, config: DriverConfig) -> None:
        self.config = config
        self.executing: dict[int, ClaimedJob] = {}
        self.buffer: list[OutcomeReport] = []
        self.reservations: deque[int] = deque()  # one per claim issued and not yet completed
        self.reports_in_flight: deque[int] = deque()  # sizes of outcome batches not yet answered
        self.pending_claims: deque[PlannedClaim] = deque()  # the rest of a Weighted pass
        self.cancel_signalled: set[int] = set()
        self.last_maintenance: datetime | None = None
        self.expiring = False
        self.releases_in_flight = 0
        self.draining = False  # shutdown requested: claim nothing more
        self.grace_over = False  # shutdown grace expired: run nothing more
        self.stopped = False

    # -- what the Shell may ask --------------------------------------------------------------------

    @property
    def occupied(self) -> int:
        """Slots held: running, finished but unreported, being reported, and reserved by claims."""
        return len(self.executing) + len(self.buffer) + sum(self.reports_in_flight) + sum(self.reservations)

    @property
    def available(self) -> int:
        return max(0, min(self.config.max_claim_batch, self.config.pool_size - self.occupied))

    # -- the one entry point -----------------------------------------------------------------------

    def step(self, event: ev.Event) -> list[cmd.Command]:
        if self.stopped:
            return []
        match event:
            case ev.PollDue():
                return self._on_poll()
            case ev.ClaimCompleted():
                return self._on_claim_completed(event)
            case ev.ExecutionSucceeded():
                return self._on_finished(event.job_id, OutcomeKind.SUCCEEDED, "", event.now)
            case ev.ExecutionFailed():
                return self._on_finished(event.job_id, OutcomeKind.FAILED, event.message, event.now)
            case ev.ExecutionCancelled():
                return self._on_finished(event.job_id, OutcomeKind.CANCELLED, "operator-cancel", event.now)
            case ev.ExecutionUnroutable():
                return self._on_finished(event.job_id, OutcomeKind.UNROUTABLE, event.reason, event.now)
            case ev.OutcomesReported():
                return self._on_outcomes_reported(event)
            case ev.HeartbeatDue():
                return self._on_heartbeat_due()
            case ev.HeartbeatCompleted():
                return self._on_heartbeat_completed(event)
            case ev.MaintenanceDue():
                return self._on_maintenance_due(event.now)
            case ev.LeasesExpired():
                return self._on_leases_expired(event)
            case ev.ShutdownRequested():
                self.draining = True
                self.pending_claims.clear()
                return self._flush() + self._stop_if_idle()
            case ev.GraceExpired():
                return self._on_grace_expired()
            case ev.LeasesReleased():
                if not self.releases_in_flight:
                    raise AssertionError("a LeasesReleased arrived with no release in flight")
                self.releases_in_flight -= 1
                return self._stop_if_idle()
        raise TypeError(f"the Node Driver got an unknown event: {event!r}")

    # -- claims ------------------------------------------------------------------------------------

    def _on_poll(self) -> list[cmd.Command]:
        if self.draining:
            return self._flush()
        available = self.available  # sized before the flush: buffered outcomes still hold leases
        commands = self._flush()
        if self.reservations:
            # A claim is in flight: its completion continues the pass (or refills, when it came back
            # full). Planning a new pass now would restart a Weighted rotation from its first queue.
            return commands
        plan = self.config.policy.plan(available)
        self.pending_claims = deque(plan[1:])
        if plan:
            commands.append(self._issue(plan[0]))
        return commands

    def _issue(self, claim: PlannedClaim) -> cmd.ClaimBatch:
        self.config.policy.charge(claim)
        self.reservations.append(claim.max_jobs)
        return cmd.ClaimBatch(
            queues=claim.queues, max_jobs=claim.max_jobs, lease_duration=self.config.lease_duration
        )

    def _on_claim_completed(self, event: ev.ClaimCompleted) -> list[cmd.Command]:
        if not self.reservations:
            raise AssertionError("a ClaimCompleted arrived with no claim in flight")
        reserved = self.reservations.popleft()
        if self.grace_over and event.jobs:  # landed after the grace period: give them straight back
            self.releases_in_flight += 1
            return [cmd.ReleaseLeases(job_ids=tuple(job.id for job in event.jobs))]
        commands: list[cmd.Command] = []
        for job in event.jobs:
            if job.id in self.executing:
                raise AssertionError(f"job {job.id} was claimed while this pump already runs it")
            self.executing[job.id] = job
            commands.append(cmd.ExecuteJob(job=job))
        if event.failed or not event.jobs or self.draining:
            self.pending_claims.clear()  # an empty claim ends a Weighted pass
        elif self.pending_claims:
            planned = self.pending_claims.popleft()
            take = min(planned.max_jobs, self.available)
            if take > 0:
                commands.append(self._issue(PlannedClaim(queues=planned.queues, max_jobs=take)))
            else:
                self.pending_claims.clear()
        elif len(event.jobs) >= reserved and self.available > 0:
            commands.append(cmd.RequestPoll())  # a full batch: more is likely waiting, fill the pool
        return commands + self._stop_if_idle()

    # -- outcomes ----------------------------------------------------------------------------------

    def _on_finished(self, job_id: int, kind: OutcomeKind, message: str, now: datetime) -> list[cmd.Command]:
        job = self.executing.pop(job_id, None)
        if job is None:
            return []  # abandoned or released: its lease is gone, so its result is dropped
        self.cancel_signalled.discard(job_id)
        retry_at = None
        if kind is OutcomeKind.FAILED:
            retry_at = self.config.retry.next_attempt_at(job.attempt, job.max_attempts, now, key=job_id)
        self.buffer.append(
            OutcomeReport(job_id=job_id, attempt=job.attempt, kind=kind, retry_at=retry_at, message=message)
        )
        if len(self.buffer) >= self.config.outcome_batch or not self.executing or self.draining:
            return self._flush()
        return []

    def _flush(self) -> list[cmd.Command]:
        if not self.buffer:
            return []
        reports, self.buffer = tuple(self.buffer), []
        self.reports_in_flight.append(len(reports))
        return [cmd.ReportOutcomes(reports=reports)]

    def _on_outcomes_reported(self, event: ev.OutcomesReported) -> list[cmd.Command]:
        if not self.reports_in_flight:
            raise AssertionError("an OutcomesReported arrived with no report in flight")
        self.reports_in_flight.popleft()
        if self.draining:
            return self._stop_if_idle()
        # An applied outcome frees a slot (and may release dependent work): look again, queued, not inline.
        return [cmd.RequestPoll()] if event.applied else []

    # -- heartbeats and cancellation ---------------------------------------------------------------

    def _on_heartbeat_due(self) -> list[cmd.Command]:
        commands = self._flush()
        if self.executing:
            commands.append(
                cmd.Heartbeat(job_ids=tuple(self.executing), lease_duration=self.config.lease_duration)
            )
        return commands

    def _on_heartbeat_completed(self, event: ev.HeartbeatCompleted) -> list[cmd.Command]:
        commands: list[cmd.Command] = []
        for result in event.results:
            if result.job_id not in self.executing:
                continue  # finished while the heartbeat was in flight
            if not result.renewed:
                del self.executing[result.job_id]
                self.cancel_signalled.discard(result.job_id)
                commands.append(cmd.AbandonExecution(job_id=result.job_id))
            elif result.cancel_requested and result.job_id not in self.cancel_signalled:
                self.cancel_signalled.add(result.job_id)
                commands.append(cmd.SignalCancellation(job_id=result.job_id))
        if not self.executing:
            commands += self._flush()  # the drain-tail rule: nothing else will come to fill the batch
        return commands + self._stop_if_idle()

    # -- maintenance -------------------------------------------------------------------------------

    def _on_maintenance_due(self, now: datetime) -> list[cmd.Command]:
        last = self.last_maintenance
        if self.expiring or (last is not None and now - last < self.config.maintenance_interval):
            return []
        self.last_maintenance = now
        return [self._expire()]

    def _expire(self) -> cmd.ExpireLeases:
        self.expiring = True
        return cmd.ExpireLeases(
            queues=self.config.policy.served_queues,
            max_jobs=self.config.max_claim_batch,
            retry=self.config.retry,
        )

    def _on_leases_expired(self, event: ev.LeasesExpired) -> list[cmd.Command]:
        self.expiring = False
        if not event.failed and event.count >= self.config.max_claim_batch:
            return [self._expire()]  # a full batch: there may be more, recover the backlog now
        return []

    # -- shutdown ----------------------------------------------------------------------------------

    def _on_grace_expired(self) -> list[cmd.Command]:
        self.draining = self.grace_over = True
        commands = self._flush()
        if self.executing:
            ids = tuple(self.executing)
            self.executing.clear()
            self.cancel_signalled.clear()
            self.releases_in_flight += 1
            commands.append(cmd.ReleaseLeases(job_ids=ids))
            commands.extend(cmd.AbandonExecution(job_id=job_id) for job_id in ids)
        return commands + self._stop_if_idle()

    def _stop_if_idle(self) -> list[cmd.Command]:
        idle = not (
            self.executing
            or self.buffer
            or self.reports_in_flight
            or self.reservations
            or self.releases_in_flight
        )
        if self.draining and idle:
            self.stopped = True
            return [cmd.Stop()]
        return []
