"""Builders for the Node Driver's tests: a config, times, jobs, events, commands, and the script runner.

A script is a list of ``(event, expected commands)`` pairs, run in order on one fresh Driver: every step's
commands are compared exactly, in order. Times are seconds after ``T0``; every builder takes ``s=`` for the
event's ``now``. The default config is small (a pool of 4, claims of 3, outcome batches of 3, no timeout) so
that every cap shows in a short script.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core import events as ev
from backwave_django.core.dispatch import Strict, Weighted
from backwave_django.core.driver import DriverConfig, NodeDriver
from backwave_django.core.health import Health
from backwave_django.core.records import ClaimedJob, HeartbeatResult, OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=60)
Q = ("default",)
RETRY = RetryPolicy(jitter=False)
Step = tuple[ev.Event, list[cmd.Command]]


def at(seconds: float = 0) -> datetime:
    return T0 + timedelta(seconds=seconds)


def secs(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


# -- the Driver ----------------------------------------------------------------------------------------------


def config(**overrides: Any) -> DriverConfig:
    """A DriverConfig (it has no defaults of its own): a Strict policy on ``default``, a pool of 4, claims and
    outcome batches of 3, 60 s leases, maintenance every 5 s, exact retries, no timeout and no linger
    (outcomes are written whenever the Driver is idle; tests/core/driver/test_outcomes.py sets one). A
    callable ``policy`` is called, so a Weighted policy (it keeps credit) is fresh for every Driver."""
    dials: dict[str, Any] = {
        "policy": Strict(Q),
        "pool_size": 4,
        "max_claim_batch": 3,
        "max_outcome_batch": 3,
        "lease_duration": LEASE,
        "maintenance_interval": secs(5),
        "retry": RETRY,
        "timeout": None,
        "report_linger": timedelta(0),
        **overrides,
    }
    if callable(dials["policy"]):
        dials["policy"] = dials["policy"]()
    return DriverConfig(**dials)


def driver(**overrides: Any) -> NodeDriver:
    return NodeDriver(config(**overrides))


def weighted(*weights: tuple[str, int]) -> Callable[[], Weighted]:
    """A factory: a Weighted policy keeps credit, so every scenario must get a fresh one."""
    return partial(Weighted, weights)


def run(node: NodeDriver, script: Sequence[Step]) -> None:
    for number, (event, expected) in enumerate(script, start=1):
        assert node.step(event) == expected, f"step {number}: {event!r}"
        assert node.occupied <= node.config.pool_size, f"step {number} overshot the pool"


def scenario(name: str, script: list[Step], **dials: Any) -> Any:
    """One parametrized case: the dials for :func:`config` and the script, named by the behaviour."""
    return pytest.param(dials, script, id=name)


# -- jobs ----------------------------------------------------------------------------------------------------


def job(
    job_id: int,
    *,
    attempt: int = 1,
    max_attempts: int = 10,
    queue: str = "default",
    timeout: float | None = None,
) -> ClaimedJob:
    return ClaimedJob(
        id=job_id,
        wire_name="tests.noop",
        queue=queue,
        payload="{}",
        attempt=attempt,
        max_attempts=max_attempts,
        due_at=T0,
        timeout=None if timeout is None else secs(timeout),
    )


def as_job(item: int | ClaimedJob) -> ClaimedJob:
    return item if isinstance(item, ClaimedJob) else job(item)


# -- events --------------------------------------------------------------------------------------------------


def poll(s: float = 0) -> ev.PollDue:
    return ev.PollDue(now=at(s))


def idle(s: float = 0) -> ev.Idle:
    return ev.Idle(now=at(s))


def claimed(*jobs: int | ClaimedJob, s: float = 0, failed: bool = False) -> ev.ClaimCompleted:
    return ev.ClaimCompleted(now=at(s), jobs=tuple(as_job(j) for j in jobs), failed=failed)


def succeeded(job_id: int, s: float = 0) -> ev.ExecutionSucceeded:
    return ev.ExecutionSucceeded(now=at(s), job_id=job_id)


def raised(job_id: int, message: str = "boom", s: float = 0) -> ev.ExecutionFailed:
    return ev.ExecutionFailed(now=at(s), job_id=job_id, message=message)


def unroutable(
    job_id: int, reason: str = "no handler for 'tests.gone'", s: float = 0
) -> ev.ExecutionUnroutable:
    return ev.ExecutionUnroutable(now=at(s), job_id=job_id, reason=reason)


def reported(
    applied: Sequence[int] = (),
    stale: Sequence[int] = (),
    *,
    failed: bool = False,
    opened: bool = True,
    s: float = 0,
) -> ev.OutcomesReported:
    return ev.OutcomesReported(
        now=at(s), applied=frozenset(applied), stale=frozenset(stale), failed=failed, opened=opened
    )


def beat_due(s: float = 0) -> ev.HeartbeatDue:
    return ev.HeartbeatDue(now=at(s))


def beat_done(*results: HeartbeatResult, failed: bool = False, s: float = 0) -> ev.HeartbeatCompleted:
    return ev.HeartbeatCompleted(now=at(s), results=results, failed=failed)


def renewed(job_id: int) -> HeartbeatResult:
    return HeartbeatResult(job_id=job_id, renewed=True, cancel_requested=False)


def lost(job_id: int) -> HeartbeatResult:
    return HeartbeatResult(job_id=job_id, renewed=False, cancel_requested=False)


def cancel_asked(job_id: int) -> HeartbeatResult:
    return HeartbeatResult(job_id=job_id, renewed=True, cancel_requested=True)


def maintenance(s: float = 0, *, leases_lapsed: bool = True) -> ev.MaintenanceDue:
    return ev.MaintenanceDue(now=at(s), leases_lapsed=leases_lapsed)


def expired(count: int, *, failed: bool = False, s: float = 0) -> ev.LeasesExpired:
    return ev.LeasesExpired(now=at(s), count=count, failed=failed)


def timer(s: float) -> ev.TimerFired:
    return ev.TimerFired(now=at(s))


def fault(detail: str = "OperationalError: server closed the connection", *, s: float = 0) -> ev.StoreFaulted:
    """A transient store fault."""
    return ev.StoreFaulted(now=at(s), transient=True, detail=detail)


def fatal(detail: str = "ProgrammingError: relation does not exist", *, s: float = 0) -> ev.StoreFaulted:
    """A store fault no retry can cure."""
    return ev.StoreFaulted(now=at(s), transient=False, detail=detail)


def threads(running: int, unreplaced: int = 0, *, s: float = 0) -> ev.ThreadsAbandoned:
    return ev.ThreadsAbandoned(now=at(s), running=running, unreplaced=unreplaced)


def shutdown(grace: float = 30, *, s: float = 0) -> ev.ShutdownRequested:
    return ev.ShutdownRequested(now=at(s), grace=secs(grace))


#: One event of every type, for the tests that must hold whatever the event.
EVERY_EVENT: list[ev.Event] = [
    poll(),
    idle(),
    claimed(1),
    succeeded(1),
    raised(1),
    unroutable(1),
    reported(applied=[1]),
    beat_due(),
    beat_done(lost(1)),
    maintenance(),
    expired(3),
    ev.SchedulesLoaded(now=at(0)),
    ev.SchedulesMinted(now=at(0), minted=1),
    ev.FinishedPurged(now=at(0), count=1),
    timer(0),
    fault(),
    threads(1, 1),
    shutdown(),
]


# -- commands ------------------------------------------------------------------------------------------------


def claim(n: int, queues: tuple[str, ...] = Q) -> cmd.ClaimBatch:
    return cmd.ClaimBatch(queues=queues, max_jobs=n, lease_duration=LEASE)


def execute(
    *jobs: int | ClaimedJob, cut_off: float | Sequence[float | None] | None = None
) -> list[cmd.Command]:
    """ExecuteJob for each job; ``cut_off`` is the second each is given up at if it still runs (its time limit
    plus the grace): one for every job, or one per job."""
    cuts = list(cut_off) if isinstance(cut_off, Sequence) else [cut_off] * len(jobs)
    return [
        cmd.ExecuteJob(job=as_job(j), cut_off_at=None if c is None else at(c))
        for j, c in zip(jobs, cuts, strict=True)
    ]


def outcome(
    job_id: int, kind: OutcomeKind, message: str = "", *, attempt: int = 1, max_attempts: int = 10
) -> OutcomeReport:
    return OutcomeReport(
        job_id=job_id, attempt=attempt, kind=kind, max_attempts=max_attempts, message=message
    )


def ok(job_id: int, *, attempt: int = 1) -> OutcomeReport:
    return outcome(job_id, OutcomeKind.SUCCEEDED, attempt=attempt)


def failed(job_id: int, message: str = "boom", *, attempt: int = 1, max_attempts: int = 10) -> OutcomeReport:
    return outcome(job_id, OutcomeKind.FAILED, message, attempt=attempt, max_attempts=max_attempts)


def timed_out(job_id: int, seconds: str, *, attempt: int = 1) -> OutcomeReport:
    return failed(job_id, f"timed out after {seconds} s", attempt=attempt)


def cancelled(job_id: int, *, attempt: int = 1) -> OutcomeReport:
    return outcome(job_id, OutcomeKind.CANCELLED, attempt=attempt)


def released(job_id: int, *, attempt: int = 1) -> OutcomeReport:
    return outcome(job_id, OutcomeKind.RELEASED, attempt=attempt)


def report(*reports: OutcomeReport, retry: RetryPolicy = RETRY) -> cmd.ReportOutcomes:
    return cmd.ReportOutcomes(reports=reports, retry=retry)


def heartbeat(*job_ids: int) -> cmd.Heartbeat:
    return cmd.Heartbeat(job_ids=job_ids, lease_duration=LEASE)


def load(queues: tuple[str, ...] = Q) -> cmd.LoadSchedules:
    return cmd.LoadSchedules(queues=queues)


def sweep(max_jobs: int = 3, queues: tuple[str, ...] = Q, retry: RetryPolicy = RETRY) -> cmd.ExpireLeases:
    return cmd.ExpireLeases(queues=queues, max_jobs=max_jobs, retry=retry)


def signal(*job_ids: int) -> list[cmd.Command]:
    return [cmd.SignalCancellation(job_id=i) for i in job_ids]


def abandon(*job_ids: int) -> list[cmd.Command]:
    return [cmd.AbandonExecution(job_id=i) for i in job_ids]


def wake(s: float) -> cmd.WakeAt:
    return cmd.WakeAt(at=at(s))


def status(health: Health = Health.RUNNING, detail: str = "") -> cmd.RecordStatus:
    return cmd.RecordStatus(health=health, detail=detail)


def degraded(detail: str = "OperationalError: server closed the connection") -> cmd.RecordStatus:
    return status(Health.DEGRADED, detail)


RUNNING = status()
REPOLL = cmd.RequestPoll()
#: How a drained Driver ends: it records that it stopped, then tells the Shell its loop may end.
STOPPED: list[cmd.Command] = [status(Health.STOPPED), cmd.Stop()]
