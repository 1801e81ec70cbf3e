"""The simulated executor: ``shell.executor.Executor`` without threads.

It routes a claimed job (an unknown wire name becomes ``ExecutionUnroutable`` at once and never reaches a
handler), launches the Attempt in the Pump's pool, signals and abandons running Attempts, keeps what each
ended Attempt leaves for its outcome (a failure's traceback, a success's return value) until the outcome is
written, and turns a handler's end into exactly one event, unless the Attempt was given up on meanwhile (its
result is then dropped). A job whose handler returns a value returns the JSON text of
``"<worker>/<job>/<attempt>"``: the stored output names the Attempt that produced it. The shell-side
invariants about handlers (the pool bound, time limits, nothing started after a shutdown's grace) are
checked here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..core import events as ev
from ..core.driver import TIMEOUT_GRACE
from ..core.records import ClaimedJob, OutcomeReport
from ..store.contract import OutcomeDetail
from .calendar import ROUTABLE
from .handlers import Attempt, Pool, behaviour

if TYPE_CHECKING:
    from .pump import SimPump


def attempt_tag(attempt: int, worker_id: str) -> str:
    """The tag a simulated Attempt gives its job (stored form): which Attempt, run by which Pump."""
    return f"by:{attempt}@{worker_id}"


class Executor:
    def __init__(self, pump: SimPump) -> None:
        self.pump = pump
        self.pool = Pool(pump, self, pump.spec.pool_size)
        self.inflight: dict[int, Attempt] = {}
        self.details: dict[tuple[int, int], OutcomeDetail] = {}

    def execute(
        self, job: ClaimedJob, event_now: datetime, cut_off_at: datetime | None = None
    ) -> ev.Event | None:
        """ExecuteJob, obeyed in a step of event time ``event_now``: the unroutable event, or None. The
        simulated store's writes never wait for a handler, so ``cut_off_at`` (the shell's cut-off alarm) is
        only checked: the Driver's own deadline plus the grace."""
        pump, checker = self.pump, self.pump.sim.checker
        if job.wire_name != ROUTABLE:
            reason = f"no job is registered as {job.wire_name!r}"
            return ev.ExecutionUnroutable(now=pump.wall(), job_id=job.id, reason=reason)
        checker.expect(
            pump.grace_ends is None or event_now < pump.grace_ends,
            "NothingStartsAfterGrace",
            lambda: f"{pump.worker_id} starts job {job.id}#{job.attempt} after its shutdown grace ended",
        )
        schedule = pump.sim.schedules.get(job.payload)  # a run of a schedule: its payload names it
        returns = False
        if schedule is not None:
            site, duration = f"schedule-{schedule.name}", schedule.duration
        else:
            spec = pump.sim.scenario.jobs[int(job.payload)]
            site, duration, returns = f"job{spec.key}", spec.duration, spec.returns
        attempt = behaviour(pump.sim.plan, job, site, duration)
        if returns:
            attempt.output = json.dumps(f"{pump.worker_id}/{job.id}/{job.attempt}")
        group_timeout = None if pump.spec.timeout is None else timedelta(seconds=pump.spec.timeout)
        timeout = job.timeout or group_timeout
        if timeout is not None:
            attempt.limit_at = event_now + timeout  # the Driver's deadline, from the same event
        expected = None if attempt.limit_at is None else attempt.limit_at + TIMEOUT_GRACE
        checker.expect(
            cut_off_at == expected,
            "TimeLimitHolds",
            lambda: (
                f"{pump.worker_id} would cut job {job.id}#{job.attempt} off at {cut_off_at}, not {expected}"
            ),
        )
        self.inflight[job.id] = attempt
        checker.expect(
            len(self.inflight) <= pump.spec.pool_size,
            "PumpPoolBound",
            lambda: (
                f"{pump.worker_id} runs {len(self.inflight)} handlers, its pool has {pump.spec.pool_size}"
            ),
        )
        if pump.sim.tracing:
            fate = "hangs" if attempt.deaf else ("fails" if attempt.message else "succeeds")
            pump.sim.note(
                pump.site, f"   handler {job.id}#{job.attempt} {fate} after {attempt.duration / 1e6:g}s"
            )
        self.pool.submit(attempt)
        return None

    def signal(self, job_id: int) -> None:
        attempt = self.inflight.get(job_id)
        if attempt is not None:
            self.pool.signal(attempt)

    def abandon(self, job_id: int) -> None:
        """Stop waiting for the handler: its result will be dropped; its thread may stay stuck."""
        attempt = self.inflight.pop(job_id, None)
        if attempt is not None:
            attempt.abandoned = True
            self.pool.signal(attempt)
            self.pool.abandoned()

    def ended(self, attempt: Attempt, message: str | None) -> None:
        """A handler returned (``message`` None) or raised: one event, if the Attempt is still ours."""
        job, pump = attempt.job, self.pump
        if self.inflight.get(job.id) is not attempt:
            return
        del self.inflight[job.id]
        tags = (attempt_tag(job.attempt, pump.worker_id),)  # every Attempt tags its job with who ran it
        if message is None:
            pump.sim.checker.returned[pump.worker_id, job.id, job.attempt] = attempt.output
            self.details[job.id, job.attempt] = OutcomeDetail(output=attempt.output, tags=tags)
            pump.post(ev.ExecutionSucceeded(now=pump.wall(), job_id=job.id))
            return
        self.details[job.id, job.attempt] = OutcomeDetail(traceback=attempt.detail, tags=tags)
        pump.post(ev.ExecutionFailed(now=pump.wall(), job_id=job.id, message=message))

    def details_for(self, reports: Sequence[OutcomeReport]) -> dict[int, OutcomeDetail]:
        """What these reports' Attempts left for their outcomes, by job id (``shell.executor``'s rule)."""
        # Two Attempts of one job can share a batch (a report believed lost, sent again after a new claim):
        # the later Attempt's detail wins, so a fenced-off Attempt's tags or value never ride on the other's.
        ordered = sorted(reports, key=lambda r: r.attempt)
        found = ((r.job_id, self.details.get((r.job_id, r.attempt))) for r in ordered)
        return {job_id: detail for job_id, detail in found if detail is not None}

    def forget_details(self, reports: Sequence[OutcomeReport]) -> None:
        for report in reports:
            self.details.pop((report.job_id, report.attempt), None)

    def check_time_limits(self, now: datetime) -> None:
        """After a step at event time ``now``: a handler whose time limit passed a grace ago must have been
        given up (the Driver fires its deadlines from the same event times), however late its loop saw it."""
        checker = self.pump.sim.checker
        for attempt in self.inflight.values():
            if attempt.limit_at is None or now < attempt.limit_at:
                continue
            checker.checks += 1
            if now >= attempt.limit_at + TIMEOUT_GRACE:
                job, past = attempt.job, (now - attempt.limit_at).total_seconds()
                checker.fail(
                    "TimeLimitHolds",
                    f"{self.pump.worker_id} runs job {job.id}#{job.attempt} {past:g}s past its time limit",
                )
