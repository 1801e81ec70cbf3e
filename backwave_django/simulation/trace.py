"""The event trace of a run: one short line per event a Driver took, command it gave, and fault injected.

Only a run asked to trace (``--trace``, a failure being shown, the determinism test) formats anything; the
others pay for nothing but a check of a flag.
"""

from __future__ import annotations

from ..core import commands as cmd
from ..core import events as ev
from ..core.records import ClaimedJob


def _jobs(jobs: tuple[ClaimedJob, ...]) -> str:
    return "[" + " ".join(f"{j.id}#{j.attempt}" for j in jobs) + "]"


def _ids(ids: frozenset[int] | tuple[int, ...]) -> str:
    return "[" + " ".join(str(i) for i in sorted(ids)) + "]"


def _short(text: str) -> str:
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 60 else f"{text[:57]}...({len(text)} chars)"


def event(e: ev.Event) -> str:
    name = type(e).__name__
    match e:
        case ev.ClaimCompleted(jobs=jobs, failed=failed):
            return f"{name} {_jobs(jobs)}" + (" failed" if failed else "")
        case ev.ExecutionSucceeded(job_id=job_id):
            return f"{name} {job_id}"
        case ev.ExecutionFailed(job_id=job_id, message=message):
            return f"{name} {job_id} {_short(message)}"
        case ev.ExecutionUnroutable(job_id=job_id):
            return f"{name} {job_id}"
        case ev.OutcomesReported(applied=applied, stale=stale, failed=failed):
            return f"{name} applied={_ids(applied)} stale={_ids(stale)}" + (" failed" if failed else "")
        case ev.HeartbeatCompleted(results=results, failed=failed):
            beats = " ".join(
                f"{r.job_id}{'' if r.renewed else '(lost)'}{'(cancel)' if r.cancel_requested else ''}"
                for r in results
            )
            return f"{name} [{beats}]" + (" failed" if failed else "")
        case ev.LeasesExpired(count=count, failed=failed) | ev.FinishedPurged(count=count, failed=failed):
            return f"{name} {count}" + (" failed" if failed else "")
        case ev.SchedulesLoaded(schedules=schedules, failed=failed):
            states = " ".join(
                f"{s.name}@{s.cursor.time()}{'(paused)' if s.paused else ''}"
                f"{'(live)' if s.has_live_instance else ''}"
                for s in schedules
            )
            return f"{name} [{states}]" + (" failed" if failed else "")
        case ev.SchedulesMinted(minted=minted, failed=failed):
            return f"{name} {minted}" + (" failed" if failed else "")
        case ev.StoreFaulted(transient=transient, detail=detail):
            return f"{name} {'transient' if transient else 'FATAL'} {_short(detail)}"
        case ev.ThreadsAbandoned(running=running, unreplaced=unreplaced):
            return f"{name} running={running} unreplaced={unreplaced}"
        case ev.ShutdownRequested(grace=grace):
            return f"{name} grace={grace.total_seconds():g}s"
    return name


def command(c: cmd.Command) -> str:
    name = type(c).__name__
    match c:
        case cmd.ClaimBatch(queues=queues, max_jobs=max_jobs):
            return f"{name} {','.join(queues)} x{max_jobs}"
        case cmd.ExecuteJob(job=job):
            return f"{name} {job.id}#{job.attempt}"
        case cmd.ReportOutcomes(reports=reports):
            return f"{name} " + " ".join(f"{r.job_id}#{r.attempt}:{r.kind}" for r in reports)
        case cmd.Heartbeat(job_ids=job_ids):
            return f"{name} {_ids(job_ids)}"
        case cmd.ExpireLeases(queues=queues, max_jobs=max_jobs):
            return f"{name} {','.join(queues)} x{max_jobs}"
        case cmd.PurgeFinished(rules=rules, max_jobs=max_jobs):
            return (
                f"{name} "
                + " ".join(f"{','.join(r.queues)}<{r.before.time()}" for r in rules)
                + f" x{max_jobs}"
            )
        case cmd.MintSchedules(decisions=decisions):
            return f"{name} " + " ".join(
                f"{d.schedule}:{d.expected_cursor.time()}->{d.new_cursor.time()}"
                f" mint{[t.time().isoformat() for t in d.ticks]} skip{d.skipped_count}"
                for d in decisions
            )
        case cmd.SignalCancellation(job_id=job_id) | cmd.AbandonExecution(job_id=job_id):
            return f"{name} {job_id}"
        case cmd.WakeAt(at=at):
            return f"{name} {at.time()}"
        case cmd.RecordStatus(health=health, detail=detail):
            return f"{name} {health} {_short(detail)}"
        case cmd.Halt(reason=reason):
            return f"{name} {_short(reason)}"
    return name
