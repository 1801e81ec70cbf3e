"""Obeying the Node Driver: one method per command, shared by the Pump and the test pump.

:meth:`CommandRunner.run` carries out a step's commands in order and returns the events they produced (store
replies), which the caller queues behind the events already waiting. Where the two pumps differ (a worker
thread or the calling thread for handlers, a real or a virtual timer) the runner asks its :class:`Host`.

When a store call raises, the runner tells the Driver (``StoreFaulted``, transient or not, as the store
classifies it) and answers every store command of the step that it did not carry out with a failed reply, so
no claim reservation or report is stranded; the other commands (starting claimed jobs) still run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from .. import telemetry
from ..core import commands as cmd
from ..core import events as ev
from ..core.health import Health
from ..core.replies import unissued
from ..core.text import describe
from ..store.contract import JobStore
from .executor import Attempt, Executor

logger = logging.getLogger("backwave.pump")


class Host(Protocol):
    """What differs between the Pump and the test pump."""

    def launch(self, attempt: Attempt) -> None:
        """Run the Attempt (``executor.run``) and post the event it returns."""

    def request_poll(self) -> None:
        """Queue a PollDue behind the events waiting (coalesced)."""

    def wake_at(self, at: datetime) -> None:
        """Post a TimerFired at ``at``, replacing any earlier request."""

    def abandoned(self, attempt: Attempt) -> None:
        """A running handler was given up on (its thread may need replacing)."""

    def halt(self, reason: str) -> None: ...

    def stop(self) -> None: ...


class CommandRunner:
    def __init__(
        self,
        *,
        store: JobStore,
        worker_id: str,
        group: str,
        queues: Sequence[str],
        started_at: datetime,
        executor: Executor,
        host: Host,
        clock: Callable[[], datetime],
        raise_faults: bool = False,
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.group = group
        self.queues = tuple(queues)
        self.started_at = started_at
        self.executor = executor
        self.host = host
        self.clock = clock
        self.raise_faults = raise_faults  # the test pump: a store fault fails the test with its traceback
        self.applied = 0  # outcomes written that applied
        self.health = Health.RUNNING  # as last recorded
        self.health_detail = ""

    def run(self, commands: Sequence[cmd.Command]) -> list[ev.Event]:
        events: list[ev.Event] = []
        for position, command in enumerate(commands):
            try:
                events += self._obey(command)
            except Exception as exc:
                if self.raise_faults:
                    raise
                transient = self.store.is_transient_fault(exc)
                detail = describe(exc)
                if transient:
                    logger.warning(
                        "%s: transient store fault, retrying with backoff: %s", self.worker_id, detail
                    )
                    self._reconnect()
                else:
                    logger.critical(
                        "%s: halted by %s. Its leases will lapse and other nodes will take the work.",
                        self.worker_id, detail, exc_info=exc,
                    )  # fmt: skip
                events.append(ev.StoreFaulted(now=self.clock(), transient=transient, detail=detail))
                events += self._answer_unissued(commands[position:])
                return events
        return events

    def _obey(self, command: cmd.Command) -> Sequence[ev.Event]:
        """One command, through its handler in :data:`HANDLERS`; the store calls that telemetry counts (a
        claim, a report, a lease sweep) go through :func:`telemetry.obey`."""
        handler = HANDLERS[type(command)]
        if handler in _OBSERVED:
            return telemetry.obey(command, self, lambda c: handler(self, c))
        return handler(self, command)

    # -- one method per command -------------------------------------------------------------------------

    def _claim(self, command: cmd.ClaimBatch) -> list[ev.Event]:
        jobs = self.store.claim(
            worker_id=self.worker_id, queues=command.queues, max_jobs=command.max_jobs,
            lease_duration=command.lease_duration, now=self.clock(),
        )  # fmt: skip
        return [ev.ClaimCompleted(now=self.clock(), jobs=tuple(jobs))]

    def _request_poll(self, command: cmd.RequestPoll) -> list[ev.Event]:
        self.host.request_poll()
        return []

    def _execute(self, command: cmd.ExecuteJob) -> list[ev.Event]:
        prepared = self.executor.prepare(command.job, command.cut_off_at)
        if isinstance(prepared, Attempt):
            self.host.launch(prepared)
            return []
        return [prepared]

    def _report(self, command: cmd.ReportOutcomes) -> list[ev.Event]:
        reports = command.reports
        details = self.executor.details_for(reports)
        result = self.store.report(
            worker_id=self.worker_id, reports=reports, retry=command.retry, now=self.clock(), details=details
        )
        self.executor.forget_details(reports)  # kept until written: a failed write is retried
        self.applied += len(result.applied)
        if result.stale:
            logger.warning(
                "%s: outcomes for jobs %s were fenced off (lease lost)", self.worker_id, sorted(result.stale)
            )
        return [
            ev.OutcomesReported(
                now=self.clock(), applied=result.applied, stale=result.stale, opened=result.opened
            )
        ]

    def _heartbeat(self, command: cmd.Heartbeat) -> list[ev.Event]:
        results = self.store.heartbeat(
            worker_id=self.worker_id, job_ids=command.job_ids, lease_duration=command.lease_duration,
            now=self.clock(),
        )  # fmt: skip
        return [ev.HeartbeatCompleted(now=self.clock(), results=tuple(results))]

    def _expire(self, command: cmd.ExpireLeases) -> list[ev.Event]:
        count = self.store.expire_leases(
            queues=command.queues, max_jobs=command.max_jobs, retry=command.retry, now=self.clock()
        )
        if count:
            logger.info("%s: ended %d Attempts whose leases lapsed", self.worker_id, count)
        return [ev.LeasesExpired(now=self.clock(), count=count)]

    def _load_schedules(self, command: cmd.LoadSchedules) -> list[ev.Event]:
        schedules = tuple(self.store.load_schedules(command.queues))
        return [ev.SchedulesLoaded(now=self.clock(), schedules=schedules)]

    def _mint(self, command: cmd.MintSchedules) -> list[ev.Event]:
        minted = self.store.mint(command.decisions, now=self.clock())
        if minted:
            logger.debug("%s: minted %d scheduled job(s)", self.worker_id, minted)
        return [ev.SchedulesMinted(now=self.clock(), minted=minted)]

    def _purge(self, command: cmd.PurgeFinished) -> list[ev.Event]:
        try:
            count = self.store.purge(command.rules, max_jobs=command.max_jobs)
        except Exception as exc:
            if self.raise_faults or self.store.is_transient_fault(exc):
                raise
            # Housekeeping never halts a Pump. A row the database refuses to delete does not get here (the
            # store deletes around it and passes over it); what does (a deferred foreign key that SQLite
            # checks only at commit, say) is logged and tried again later.
            logger.error(
                "%s: could not purge finished jobs (retrying later): %s",
                self.worker_id, describe(exc), exc_info=exc,
            )  # fmt: skip
            return [ev.FinishedPurged(now=self.clock(), failed=True)]
        if count:
            logger.info("%s: purged %d finished job(s) past their retention", self.worker_id, count)
        return [ev.FinishedPurged(now=self.clock(), count=count)]

    def _signal(self, command: cmd.SignalCancellation) -> list[ev.Event]:
        self.executor.signal(command.job_id)
        return []

    def _abandon(self, command: cmd.AbandonExecution) -> list[ev.Event]:
        attempt = self.executor.abandon(command.job_id)
        if attempt is not None:
            attempt.guard.revoke(self.store.cut_off_sessions)  # before its lease is written off
            self.host.abandoned(attempt)
        return []

    def _wake_at(self, command: cmd.WakeAt) -> list[ev.Event]:
        self.host.wake_at(command.at)
        return []

    def _record_status(self, command: cmd.RecordStatus) -> list[ev.Event]:
        self.record_status(command.health, command.detail)
        return []

    def _halt(self, command: cmd.Halt) -> list[ev.Event]:
        self.host.halt(command.reason)
        return []

    def _stop(self, command: cmd.Stop) -> list[ev.Event]:
        self.host.stop()
        return []

    def record_status(self, health: Health, detail: str) -> None:
        """Health bookkeeping: never takes the Pump down."""
        self.health, self.health_detail = health, detail
        try:
            self.store.record_pump(
                worker_id=self.worker_id,
                group=self.group,
                queues=self.queues,
                health=health,
                detail=detail,
                started_at=self.started_at,
                now=self.clock(),
            )
        except Exception as exc:
            logger.warning("%s: could not record pump status: %s", self.worker_id, describe(exc))

    def _reconnect(self) -> None:
        try:
            self.store.reconnect()
        except Exception as exc:
            logger.warning("%s: could not drop the broken connection: %s", self.worker_id, describe(exc))

    def _answer_unissued(self, commands: Sequence[cmd.Command]) -> list[ev.Event]:
        """After a fault: every store command not carried out gets a failed reply, and the rest still run
        (so jobs already claimed still start)."""
        now, events = self.clock(), list[ev.Event]()
        for command in commands:
            reply = unissued(command, now)
            if reply is not None:
                events.append(reply)
                continue
            try:
                events += self._obey(command)
            except Exception:
                logger.exception("%s: could not obey %r after a fault", self.worker_id, command)
        return events


#: The method that carries out each command, looked up by the command's type (a ``match`` over them costs the
#: later commands a check per case above them, on every command of every turn).
HANDLERS: dict[type[cmd.Command], Callable[[CommandRunner, Any], Sequence[ev.Event]]] = {
    cmd.ClaimBatch: CommandRunner._claim,
    cmd.RequestPoll: CommandRunner._request_poll,
    cmd.ExecuteJob: CommandRunner._execute,
    cmd.ReportOutcomes: CommandRunner._report,
    cmd.Heartbeat: CommandRunner._heartbeat,
    cmd.ExpireLeases: CommandRunner._expire,
    cmd.LoadSchedules: CommandRunner._load_schedules,
    cmd.MintSchedules: CommandRunner._mint,
    cmd.PurgeFinished: CommandRunner._purge,
    cmd.SignalCancellation: CommandRunner._signal,
    cmd.AbandonExecution: CommandRunner._abandon,
    cmd.WakeAt: CommandRunner._wake_at,
    cmd.RecordStatus: CommandRunner._record_status,
    cmd.Halt: CommandRunner._halt,
    cmd.Stop: CommandRunner._stop,
}
#: The store calls whose replies telemetry counts (and, with ``DEBUG_SPANS``, traces).
_OBSERVED = frozenset({CommandRunner._claim, CommandRunner._report, CommandRunner._expire})
