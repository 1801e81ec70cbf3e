"""The Node Driver: every decision one Pump makes, as ``step(event) -> commands``.

It owns claim sizing (Backpressure), dispatch, outcome batching and their retries, how a handler's ending is
classified, heartbeats, handler timeouts, the maintenance cadence, the Pump's health and the shutdown drain.
It performs no I/O and reads no clock: the Shell turns timers, hints, handler results and store replies into
events and obeys the commands in the order they are returned.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from . import commands as cmd
from . import events as ev
from .deadlines import Deadline, Deadlines, Kind
from .dispatch import PlannedClaim, Policy
from .elastic import Starvation
from .health import Health
from .maintenance import Maintenance
from .records import ClaimedJob, OutcomeKind, OutcomeReport
from .retention import RetentionRule
from .retry import RetryPolicy

#: After a handler's timeout: how long it has to stop on its own before its Attempt fails without it.
TIMEOUT_GRACE = timedelta(seconds=2)
#: After the shutdown grace: how long handlers have to stop on their own before they are cut off.
STOP_WINDOW = timedelta(seconds=2)
#: After the cut-off: how long a shutdown keeps trying to write outcomes the store refused.
FINAL_FLUSH_WINDOW = timedelta(seconds=10)
#: After a transient store fault, store work waits this long, doubling per fault up to the maximum.
STORE_BACKOFF_MIN = timedelta(milliseconds=100)
STORE_BACKOFF_MAX = timedelta(seconds=5)


#: How long a finished Attempt's outcome waits, while other handlers of the pool still run, for theirs
#: to share its write. A Pump that wrote whenever it had nothing else to do made a round-trip for every
#: job or two of a batch that ends within a few milliseconds, each holding up the claim that refills the
#: pool, and on SQLite each queuing behind the handlers' own writes (docs/performance.md, "The report
#: linger"). The last handler of the pool to finish, a full batch, a poll, a heartbeat and a shutdown
#: write at once, so a lone job is never held up.
REPORT_LINGER = timedelta(milliseconds=10)


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverConfig:
    """The dials of one Pump (their defaults live in ``conf``, the one table of defaults)."""

    policy: Policy
    pool_size: int
    max_claim_batch: int
    max_outcome_batch: int
    lease_duration: timedelta
    maintenance_interval: timedelta
    retry: RetryPolicy
    timeout: timedelta | None  # the group's time limit per Attempt; a job's own overrides it
    retention: tuple[RetentionRule, ...] = ()  # no purge unless told
    misfire_grace: timedelta = timedelta(seconds=60)  # a schedule tick older than this is missed
    report_linger: timedelta = REPORT_LINGER  # a fact of the Core, not a setting; tests may shorten it


class Why(enum.Enum):
    """Why a running handler was asked to stop: it decides what its ending counts as."""

    OPERATOR = "operator"  # a failure after this is a cancellation
    TIMEOUT = "timeout"  # a failure after this is a timeout
    SHUTDOWN = "shutdown"  # a failure after this gives the job back, uncounted


#: How the Attempt of a handler that was asked to stop ends when it fails or is cut off, by why it was asked.
STOPPED_ENDINGS: dict[Why, OutcomeKind] = {
    Why.OPERATOR: OutcomeKind.CANCELLED,
    Why.TIMEOUT: OutcomeKind.FAILED,  # with "timed out after N s" for its message
    Why.SHUTDOWN: OutcomeKind.RELEASED,
}


@dataclass(slots=True)
class _Running:
    job: ClaimedJob
    timeout: timedelta | None
    stopping: Why | None = None


class NodeDriver:
    """A sans-I/O state machine. Feed it events with :meth:`step`; obey what it returns, in order."""

    def __init__(self, config: DriverConfig) -> None:
        self.config = config
        self.executing: dict[int, _Running] = {}
        self.buffer: list[OutcomeReport] = []
        self.buffered_since: datetime | None = None  # when the oldest outcome in the buffer was buffered
        self.linger_until: datetime | None = None  # the FLUSH deadline set and not yet fired
        self.reservations: deque[int] = deque()  # one per claim issued and not yet completed
        self.reports_in_flight: deque[tuple[OutcomeReport, ...]] = deque()  # batches not yet answered
        self.pending_claims: deque[PlannedClaim] = deque()  # the rest of a Weighted pass
        # Whether work may be waiting that the last claim left: it came back full (or failed). A claim tries
        # every served queue, so one that came back short found nothing more to lease then.
        self.backlog = True
        self.starvation = Starvation(wide=min(config.pool_size, config.max_claim_batch))  # for the node
        self.deadlines = Deadlines()
        self.wake_at: datetime | None = None  # the WakeAt last asked for
        self.maintenance = Maintenance(
            policy=config.policy,
            interval=config.maintenance_interval,
            max_sweep=config.max_claim_batch,
            retry=config.retry,
            retention=config.retention,
            misfire_grace=config.misfire_grace,
        )
        self.draining = False  # shutdown requested: claim nothing more
        self.grace_ends: datetime | None = None  # shutdown: when running handlers are asked to stop
        self.grace_over = False  # shutdown: every handler running has been asked to stop; start no more
        self.cut_off = False  # shutdown: handlers still running have been given up
        self.given_up = False  # shutdown: outcomes that cannot be written are dropped, not kept
        self.stopped = False
        self.halted = False
        self.store_faults = 0  # transient faults in a row
        self.store_retry_at: datetime | None = None
        self.now: datetime | None = None  # the time of the event being handled
        self.store_detail = ""
        self.abandoned_threads = 0  # handler threads abandoned that still run
        self.lost_slots = 0  # of those, the ones the pool could not replace
        self.health = Health.RUNNING
        self.health_detail = ""

    # -- what the Shell may ask --------------------------------------------------------------------

    @property
    def occupied(self) -> int:
        """Slots held: running, finished but unreported, being reported, reserved by claims, and lost to
        abandoned threads the pool could not replace."""
        reporting = sum(len(batch) for batch in self.reports_in_flight)
        held = len(self.executing) + len(self.buffer) + reporting + sum(self.reservations)
        return held + self.lost_slots

    @property
    def available(self) -> int:
        return max(0, min(self.config.max_claim_batch, self.config.pool_size - self.occupied))

    @property
    def idle(self) -> bool:
        """Nothing running, buffered, being written or being claimed."""
        return not (self.executing or self.buffer or self.reports_in_flight or self.reservations)

    # -- the one entry point -----------------------------------------------------------------------

    def step(self, event: ev.Event) -> list[cmd.Command]:
        if self.stopped or self.halted:
            return []
        self.now = event.now
        commands = self._fire_deadlines(event.now) if self.deadlines.any_due(event.now) else []
        if not self.stopped:  # a deadline may end the drain: then this event comes after the Stop
            commands += self._dispatch(event)
        if self.stopped or self.halted:
            return commands  # nothing follows a Stop or a Halt: the Shell is ending its loop
        return commands + self._wake()

    def _dispatch(self, event: ev.Event) -> list[cmd.Command]:
        name = _HANDLERS.get(type(event))
        if name is None:
            raise TypeError(f"the Node Driver got an unknown event: {event!r}")
        handler: Callable[[Any], list[cmd.Command]] = getattr(self, name)  # by name: a subclass may override
        return handler(event)

    # -- one method per event (the table :data:`_HANDLERS`, below the class, maps each event type to one) --

    def _on_poll_due(self, event: ev.PollDue) -> list[cmd.Command]:
        return self._on_poll(event.now)

    def _on_idle(self, event: ev.Idle) -> list[cmd.Command]:
        if not self.buffer:
            return []
        if self.executing and not self.draining and self.buffered_since is not None:
            until = self.buffered_since + self.config.report_linger
            if event.now < until:
                return self._linger(until)
        return self._on_poll(event.now)

    def _linger(self, until: datetime) -> list[cmd.Command]:
        """Keep the buffered outcomes back for those of the handlers still running, until ``until`` at the
        latest."""
        if self.linger_until != until:
            self.linger_until = until
            self.deadlines.add(until, Kind.FLUSH)
        return []

    def _on_succeeded(self, event: ev.ExecutionSucceeded) -> list[cmd.Command]:
        return self._on_finished(event.job_id, OutcomeKind.SUCCEEDED, "")

    def _on_execution_failed(self, event: ev.ExecutionFailed) -> list[cmd.Command]:
        return self._on_failed(event.job_id, event.message)

    def _on_unroutable(self, event: ev.ExecutionUnroutable) -> list[cmd.Command]:
        return self._on_finished(event.job_id, OutcomeKind.UNROUTABLE, event.reason)

    def _on_heartbeat(self, event: ev.HeartbeatDue) -> list[cmd.Command]:
        return self._on_heartbeat_due(event.now)

    def _on_maintenance(self, event: ev.MaintenanceDue) -> list[cmd.Command]:
        return self._on_maintenance_due(event.now, event.leases_lapsed)

    def _on_leases_expired(self, event: ev.LeasesExpired) -> list[cmd.Command]:
        return self._recovered(event) + self.maintenance.leases_expired(event, draining=self.draining)

    def _on_schedules_loaded(self, event: ev.SchedulesLoaded) -> list[cmd.Command]:
        return self._recovered(event) + self.maintenance.schedules_loaded(event, draining=self.draining)

    def _on_schedules_minted(self, event: ev.SchedulesMinted) -> list[cmd.Command]:
        return self._recovered(event) + self.maintenance.schedules_minted(event)

    def _on_purged(self, event: ev.FinishedPurged) -> list[cmd.Command]:
        return self._recovered(event) + self.maintenance.purged(event, draining=self.draining)

    def _on_timer(self, event: ev.TimerFired) -> list[cmd.Command]:
        return []  # the deadlines it was for have fired already

    def _on_threads_abandoned(self, event: ev.ThreadsAbandoned) -> list[cmd.Command]:
        self.abandoned_threads, self.lost_slots = event.running, event.unreplaced
        return self._health_changed()

    def _store_ready(self, now: datetime | None) -> bool:
        """False while store work waits out the backoff after a transient fault."""
        return self.store_retry_at is None or now is None or now >= self.store_retry_at

    # -- claims ------------------------------------------------------------------------------------

    def _on_poll(self, now: datetime) -> list[cmd.Command]:
        if not self._store_ready(now):
            return []
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
        self.backlog = event.failed or len(event.jobs) >= reserved
        if not event.failed:
            self.starvation.observe(reserved, len(event.jobs), event.now)
        commands = [] if event.failed else self._store_recovered()
        if self.grace_over:  # landed after every handler was asked to stop: give these straight back, unrun
            for job in event.jobs:
                self._buffer(job, OutcomeKind.RELEASED, "")
            return commands + self._flush() + self._stop_if_idle()
        if len({job.id for job in event.jobs}) < len(event.jobs):
            raise AssertionError(f"a claim returned the same job twice: {[job.id for job in event.jobs]}")
        for job in event.jobs:
            if self._leave(job.id) is not None:
                # This pump lost the job's lease while it ran it (heartbeats failed until the lease lapsed
                # and was swept), and has claimed it again: the old run is given up, the new one starts.
                commands.append(cmd.AbandonExecution(job_id=job.id))
            timeout = job.timeout or self.config.timeout
            self.executing[job.id] = _Running(job, timeout)
            cut_off_at = None
            if timeout is not None:
                self.deadlines.add(event.now + timeout, Kind.TIMEOUT, job.id, job.attempt)
                cut_off_at = event.now + timeout + TIMEOUT_GRACE  # when Kind.ABANDON fires, if it still runs
            commands.append(cmd.ExecuteJob(job=job, cut_off_at=cut_off_at))
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

    # -- how a handler ended -----------------------------------------------------------------------

    def _on_failed(self, job_id: int, message: str) -> list[cmd.Command]:
        running = self.executing.get(job_id)
        if running is not None and running.stopping is not None:
            return self._on_finished(job_id, *_stopped_ending(running))
        return self._on_finished(job_id, OutcomeKind.FAILED, message)

    def _on_finished(self, job_id: int, kind: OutcomeKind, message: str) -> list[cmd.Command]:
        running = self._leave(job_id)
        if running is None:
            return []  # abandoned: its lease is gone or given up, so is its result
        self._buffer(running.job, kind, message)
        if len(self.buffer) >= self.config.max_outcome_batch or not self.executing or self.draining:
            return self._flush()
        return []

    def _leave(self, job_id: int) -> _Running | None:
        """Take a job off the running ones (if it is there); its Attempt's deadlines end with it."""
        running = self.executing.pop(job_id, None)
        if running is not None:
            self.deadlines.end(job_id, running.job.attempt)
        return running

    def _buffer(self, job: ClaimedJob, kind: OutcomeKind, message: str) -> None:
        if not self.buffer:
            self.buffered_since = self.now
        self.buffer.append(
            OutcomeReport(
                job_id=job.id, attempt=job.attempt, kind=kind, max_attempts=job.max_attempts, message=message
            )
        )

    def _flush(self) -> list[cmd.Command]:
        """Write the buffered outcomes, unless there are none or store work is backing off (the next poll,
        heartbeat or idle moment after the backoff writes them)."""
        if not self.buffer or not self._store_ready(self.now):
            return []
        reports, self.buffer = tuple(self.buffer), []
        self.reports_in_flight.append(reports)
        return [cmd.ReportOutcomes(reports=reports, retry=self.config.retry)]

    def _on_outcomes_reported(self, event: ev.OutcomesReported) -> list[cmd.Command]:
        if not self.reports_in_flight:
            raise AssertionError("an OutcomesReported arrived with no report in flight")
        batch = self.reports_in_flight.popleft()
        if event.failed:
            # Nothing was written. The leases still hold (heartbeats renew them), so the outcomes are
            # written again once the store is back; a stale one is then fenced off, never double-applied.
            # Past the final flush window they are dropped instead, as the buffer was: their leases lapse.
            if not self.given_up:
                self.buffer[:0] = batch
            return self._stop_if_idle()
        commands = self._store_recovered()
        if self.draining:
            return commands + self._stop_if_idle()
        # An applied outcome frees a slot: look again (queued, not inline) if the last claim left work
        # waiting, or if the write may have made some claimable (a retry due now, a parent's children, a slot
        # of a limited queue). Otherwise the next poll or wake-up hint finds whatever comes.
        look = event.applied and (self.backlog or event.opened)
        return commands + ([cmd.RequestPoll()] if look else [])

    # -- heartbeats and cancellation ---------------------------------------------------------------

    def _on_heartbeat_due(self, now: datetime) -> list[cmd.Command]:
        commands: list[cmd.Command] = [cmd.RecordStatus(health=self.health, detail=self.health_detail)]
        if self._store_ready(now):
            commands += self._flush()
        held = (*self.executing, *(r.job_id for r in self.buffer))
        if held:
            commands.append(cmd.Heartbeat(job_ids=held, lease_duration=self.config.lease_duration))
        return commands

    def _on_heartbeat_completed(self, event: ev.HeartbeatCompleted) -> list[cmd.Command]:
        commands = [] if event.failed else self._store_recovered()
        lost = {r.job_id for r in event.results if not r.renewed}
        self.buffer = [r for r in self.buffer if r.job_id not in lost]  # fenced off anyway: drop them
        for result in event.results:
            running = self.executing.get(result.job_id)
            if running is None:
                continue  # finished while the heartbeat was in flight
            if not result.renewed:
                self._leave(result.job_id)
                commands.append(cmd.AbandonExecution(job_id=result.job_id))
            elif result.cancel_requested and running.stopping is None:
                running.stopping = Why.OPERATOR
                commands.append(cmd.SignalCancellation(job_id=result.job_id))
        if not self.executing and self._store_ready(event.now):
            commands += self._flush()  # the drain-tail rule: nothing else will come to fill the batch
        return commands + self._stop_if_idle()

    # -- deadlines: timeouts and shutdown ----------------------------------------------------------

    def _fire_deadlines(self, now: datetime) -> list[cmd.Command]:
        """Fire every deadline ``now`` has passed, those the firing adds among them (a time limit noticed
        late: its grace has run out too)."""
        commands: list[cmd.Command] = []
        while (deadline := self.deadlines.pop_due(now)) is not None:
            commands += self._fire(deadline, now)
        return commands

    def _fire(self, deadline: Deadline, now: datetime) -> list[cmd.Command]:
        if deadline.kind is Kind.FLUSH:
            self.linger_until = None
            return self._on_poll(now) if self.buffer else []
        if deadline.kind is Kind.GRACE:
            return self._ask_all_to_stop(deadline.at)
        if deadline.kind is Kind.CUT_OFF:
            return self._give_up_all(now)
        if deadline.kind is Kind.GIVE_UP:
            self.given_up = True
            self.buffer.clear()  # their leases lapse; the sweep counts those Attempts
            return self._stop_if_idle()
        running = self.executing[deadline.job_id]  # an Attempt that ended took its deadlines with it
        if deadline.kind is Kind.TIMEOUT:
            # The time limit holds whoever asked first: a handler already asked to stop (by an operator, or
            # the shutdown) is not asked again, but is cut off at the end of the grace all the same. The grace
            # runs from the limit, not from when this loop noticed it (a loop held up by a store call): the
            # shell cuts the handler off then too (ExecuteJob.cut_off_at).
            self.deadlines.add(deadline.at + TIMEOUT_GRACE, Kind.ABANDON, deadline.job_id, deadline.attempt)
            if running.stopping is not None:
                return []
            running.stopping = Why.TIMEOUT
            return [cmd.SignalCancellation(job_id=deadline.job_id)]
        # Kind.ABANDON: the handler did not stop within the grace. Cut it off first, then end its Attempt.
        self._leave(deadline.job_id)
        self._buffer(running.job, *_stopped_ending(running))
        commands: list[cmd.Command] = [cmd.AbandonExecution(job_id=deadline.job_id)]
        if len(self.buffer) >= self.config.max_outcome_batch or not self.executing:
            commands += self._flush()
        return commands

    def _wake(self) -> list[cmd.Command]:
        earliest = self.deadlines.earliest
        if earliest is None or earliest == self.wake_at:
            return []
        self.wake_at = earliest
        return [cmd.WakeAt(at=earliest)]

    # -- maintenance -------------------------------------------------------------------------------

    def _on_maintenance_due(self, now: datetime, sweep: bool) -> list[cmd.Command]:
        if self.draining or not self._store_ready(now):
            return []
        return self.maintenance.due(now, sweep=sweep)

    def _recovered(
        self, event: ev.LeasesExpired | ev.SchedulesLoaded | ev.SchedulesMinted | ev.FinishedPurged
    ) -> list[cmd.Command]:
        return [] if event.failed else self._store_recovered()

    # -- health ------------------------------------------------------------------------------------

    def _on_store_faulted(self, event: ev.StoreFaulted) -> list[cmd.Command]:
        if not event.transient:
            self.halted = True
            self.health, self.health_detail = Health.HALTED, event.detail
            return [
                cmd.RecordStatus(health=Health.HALTED, detail=event.detail),
                cmd.Halt(reason=event.detail),
            ]
        self.store_faults += 1
        backoff = min(STORE_BACKOFF_MIN * 2 ** min(self.store_faults - 1, 16), STORE_BACKOFF_MAX)
        self.store_retry_at = event.now + backoff
        self.store_detail = event.detail
        return self._health_changed()

    def _store_recovered(self) -> list[cmd.Command]:
        """A store round-trip succeeded: only that proves the store is back."""
        if not self.store_faults:
            return []
        self.store_faults, self.store_retry_at, self.store_detail = 0, None, ""
        return self._health_changed()

    def _health_changed(self) -> list[cmd.Command]:
        if self.store_faults:
            health, detail = Health.DEGRADED, self.store_detail
        elif self.abandoned_threads:
            health = Health.DEGRADED
            detail = f"{self.abandoned_threads} abandoned handler thread(s) still running"
            if self.lost_slots:
                detail += f"; {self.lost_slots} pool slot(s) lost until they end"
        else:
            health, detail = Health.RUNNING, ""
        if (health, detail) == (self.health, self.health_detail):
            return []
        self.health, self.health_detail = health, detail
        return [cmd.RecordStatus(health=health, detail=detail)]

    # -- shutdown ----------------------------------------------------------------------------------

    def _on_shutdown(self, event: ev.ShutdownRequested) -> list[cmd.Command]:
        grace_ends = event.now + max(event.grace, timedelta(0))
        if self.grace_ends is not None:  # draining already
            # A later request may bring the grace's end earlier, never later: the node stops while a Pump it
            # let go (core.elastic) still drains with its group's longer grace.
            if self.grace_over or grace_ends >= self.grace_ends:
                return []
            self.grace_ends = grace_ends
            self.deadlines.add(grace_ends, Kind.GRACE)
            return self._fire_deadlines(event.now)
        self.draining = True
        self.grace_ends = grace_ends
        self.pending_claims.clear()
        self.deadlines.add(grace_ends, Kind.GRACE)
        return self._flush() + self._fire_deadlines(event.now) + self._stop_if_idle()

    def _ask_all_to_stop(self, grace_ended: datetime) -> list[cmd.Command]:
        """The grace is over: every handler still running is asked to stop, and gets STOP_WINDOW to do it,
        counted from the end of the grace (not from when a held-up loop noticed it: the shell's cut-off
        alarm keeps that time too)."""
        if self.grace_over:  # the first request's grace, brought earlier by a later one: over already
            return []
        self.grace_over = True
        commands: list[cmd.Command] = []
        for job_id, running in self.executing.items():
            if running.stopping is None:
                running.stopping = Why.SHUTDOWN
                commands.append(cmd.SignalCancellation(job_id=job_id))
        self.deadlines.add(grace_ended + STOP_WINDOW, Kind.CUT_OFF)
        return commands + self._stop_if_idle()

    def _give_up_all(self, now: datetime) -> list[cmd.Command]:
        """Handlers that did not stop are cut off from the database first; then their jobs are given back
        (or failed, or cancelled, by why they were asked to stop)."""
        # Always true, hence the pragma: only the GRACE deadline adds a CUT_OFF, and only the first GRACE to
        # fire does, so CUT_OFF fires once. A dead guard, kept until it is dropped.
        if not self.cut_off:  # pragma: no branch
            self.cut_off = True
            self.deadlines.add(now + FINAL_FLUSH_WINDOW, Kind.GIVE_UP)
        commands: list[cmd.Command] = []
        for job_id, running in list(self.executing.items()):
            self._leave(job_id)
            commands.append(cmd.AbandonExecution(job_id=job_id))
            self._buffer(running.job, *_stopped_ending(running))
        return commands + self._flush() + self._stop_if_idle()

    def _stop_if_idle(self) -> list[cmd.Command]:
        if self.draining and self.idle and not self.stopped:  # once: a step may reach here twice
            self.stopped = True
            return [cmd.RecordStatus(health=Health.STOPPED, detail=""), cmd.Stop()]
        return []


#: The name of the method that handles each event, looked up by the event's type: a ``match`` over them would
#: cost every event a check for each case above its own, on every step.
_HANDLERS: dict[type, str] = {
    ev.PollDue: "_on_poll_due",
    ev.Idle: "_on_idle",
    ev.ClaimCompleted: "_on_claim_completed",
    ev.ExecutionSucceeded: "_on_succeeded",
    ev.ExecutionFailed: "_on_execution_failed",
    ev.ExecutionUnroutable: "_on_unroutable",
    ev.OutcomesReported: "_on_outcomes_reported",
    ev.HeartbeatDue: "_on_heartbeat",
    ev.HeartbeatCompleted: "_on_heartbeat_completed",
    ev.MaintenanceDue: "_on_maintenance",
    ev.LeasesExpired: "_on_leases_expired",
    ev.SchedulesLoaded: "_on_schedules_loaded",
    ev.SchedulesMinted: "_on_schedules_minted",
    ev.FinishedPurged: "_on_purged",
    ev.TimerFired: "_on_timer",
    ev.StoreFaulted: "_on_store_faulted",
    ev.ThreadsAbandoned: "_on_threads_abandoned",
    ev.ShutdownRequested: "_on_shutdown",
}


def _stopped_ending(running: _Running) -> tuple[OutcomeKind, str]:
    """The outcome kind and message of a handler asked to stop that failed or was cut off (one cut off with
    no reason yet, a shutdown's doing, is given back)."""
    why = running.stopping or Why.SHUTDOWN
    return STOPPED_ENDINGS[why], _timed_out(running.timeout) if why is Why.TIMEOUT else ""


def _timed_out(timeout: timedelta | None) -> str:
    seconds = timeout.total_seconds() if timeout is not None else 0.0
    return f"timed out after {seconds:g} s"
