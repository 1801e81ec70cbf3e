"""The invariants, by name, and the checker that holds a run to them after every step.

The checker watches the store through its ``observe`` hook, so each check looks only at the job a change
touched (and the few counters it keeps), never at the whole store: checking stays cheap enough to run after
every step. The shell side (pools, time limits, the Driver itself) is checked by the simulated Pumps through
the same checker. The first violation ends the run; its name is what the minimizer keeps tripping. Those of
schedules are in ``schedule_checks``, those of priorities, unique keys and return values in
``feature_checks``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..core.records import OutcomeKind
from ..core.states import INITIAL_STATES, State, is_legal
from ..core.text import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES
from ..store.contract import MAX_HEALTH_DETAIL_BYTES, JobView, PumpView, QueueView, ScheduleView
from ..store.memory import JobChange, MemoryStore
from .dependency_checks import DependencyWatch
from .executor import attempt_tag
from .feature_checks import FeatureWatch
from .schedule_checks import Loaded, ScheduleWatch

__all__ = ["INVARIANTS", "Checker", "Loaded", "Violation"]

#: Every invariant, with the one line the docs and the failure messages give for it.
INVARIANTS: dict[str, str] = {
    "NoJobLost": "every job the store accepted is still there, exactly as its last observed change left it",
    "OneOutcomePerAttempt": "an Attempt (one claim) ends at most once: one applied report or one expiry",
    "OutcomeFromLeaseHolder": "an applied report comes from the worker holding that Attempt's live lease, "
    "for the Attempt it reported; an expiry ends only a lapsed lease",
    "OutcomeMatchesRun": "a success is reported only for an Attempt whose handler returned, and a quarantine "
    "only for a job no handler is registered for",
    "FenceAdmitsHolder": "a report the lease holder writes for the Attempt it holds, on a live lease, "
    "applies",
    "TraceContextKept": "a job keeps the trace context it was enqueued with, through every change",
    "LegalTransition": "every job is born in a legal first state and moves only along "
    "core.states.TRANSITIONS",
    "LeaseMatchesState": "a job is leased exactly when it has a lease",
    "AttemptAccounting": "a claim adds one to the attempt counter, a released Attempt gives it back, a "
    "requeue resets it, and nothing else changes it",
    "AttemptCeiling": "no job is claimed past max_attempts, retried at the ceiling, or dead-lettered "
    "before it",
    "PumpPoolBound": "a Pump never runs more handlers at once than its pool size",
    "ConcurrencyLimit": "a claim never leaves a limited queue with more leased jobs than its limit",
    "PausedQueueNotClaimed": "no job is claimed from a queue whose pause has committed",
    "StoredTextBounded": "every stored message, cause, traceback and health detail is storable (no NUL, no "
    "lone surrogate) and within its bound",
    "TimeLimitHolds": "a handler past its time limit is given up within the grace that follows it",
    "NothingStartsAfterGrace": "once a shutdown's grace is over, a Pump starts no handler",
    "StatusFinal": "the last status a Pump records is the one it ended with (stopped or halted)",
    "ShutdownBounded": "a Pump asked to shut down stops within its grace and the Driver's windows (plus the "
    "node's 5 s of slack), unless its loop was frozen meanwhile",
    "PumpsGrowOnlyWhenStarved": "a node adds a Pump to a group only while each of its Pumps has claimed "
    "starved (a full batch of at least half what one claim may take) three times in a row, and never past "
    "MAX_PUMPS; it lets one go only after 30 s without a starved claim, and never below PUMPS",
    "OutcomesLingerBounded": "once its loop has nothing else to do (Idle) and the store is not backing off, "
    "a Pump holds no finished outcome unwritten longer than REPORT_LINGER, nor at all once no handler runs "
    "or a shutdown has begun",
    "PumpLoopSound": "the Driver never raises on the events the Shell feeds it",
    "DeadlinesFollowAttempts": "a Driver keeps time-limit deadlines only for the Attempts it runs (an "
    "Attempt that ends takes its deadlines with it), and holds at most twice as many entries as those, plus "
    "a fixed slack",
    "StoreSound": "the store raises nothing but the faults injected into it",
    "NoLivelock": "a run ends within its action budget (no loop at a standstill in virtual time)",
    "DrainLiveness": "once the faults heal, every job is terminal within the drain bound",
    "PurgeOnlyFinished": "a purge deletes only a finished job, never one that waits or runs",
    "TickMintedOnce": "a schedule's tick is minted at most once across the cluster, for the whole run (a "
    "purge of its run included)",
    "TickAccounting": "every tick a schedule's cursor has passed was minted, run now at that instant, or "
    "counted as skipped, exactly once; every minted run is for a tick of its cadence",
    "CoalesceOneMakeUp": "a coalesce schedule's cursor moving over missed ticks (older than the misfire "
    "grace "
    "when its Pump read it) mints at most one run for them, however many, and at least one run unless the "
    "schedule was paused, or busy with NO_OVERLAP when read or when it minted",
    "NoOverlap": "a NO_OVERLAP schedule's tick is minted only while no run of it is live, at the moment it "
    "is minted, even when a run became live after its Pump read the schedule (run now ignores NO_OVERLAP, as "
    "documented, but its run counts as live)",
    "RemovedScheduleIdle": "once its removal has committed, a schedule removed from the settings mints "
    "nothing and its cursor stays",
    "ScheduleLiveness": "once the faults heal, every schedule still in the settings keeps up: when the drain "
    "stops minting (the cluster whole again for 10 s), none has a tick older than 15 s undecided",
    "ClaimOrder": "each claim takes, queue by queue in the order asked, the first due jobs in (priority "
    "descending, due time, id) order, as many as its batch, the queue's free slots (none while paused) and "
    "the due jobs allow: nothing ranked higher is left behind",
    "TagsFromFencedOutcome": "a tag an Attempt adds reaches its job only with that Attempt's applied "
    "outcome (never from a fenced-off one), and the store holds exactly the tags observed",
    "UniqueKeyHeldOnce": "never do two unfinished jobs (scheduled, awaiting a parent or leased) of one wire "
    "name hold one unique key",
    "DuplicateIsHolder": "an enqueue that comes back as a duplicate names the unfinished job holding its key "
    "at that moment, a keyed one that does not holds the key, and a requeue refused as KEY_TAKEN was refused "
    "for a key another unfinished job holds",
    "OutputFromSuccess": "a job holds an output only once succeeded, and exactly what the handler of the "
    "Attempt that succeeded (the lease holder's) returned; nothing else (a failure, a release, a fenced-off "
    "Attempt) writes one",
    "ChildAfterParents": "a job with parents is scheduled (born so, or leaving awaiting_parent) only once "
    "every parent is finished, and, under run_on=success, succeeded",
    "EdgeResolvedOnce": "each dependency edge resolves exactly once: a job's parents_remaining is always the "
    "number of its edges still open",
    "NoChildWaitsForever": "at the end of a run, no edge of a finished parent is still open (no child waits "
    "for ever on a parent that has finished)",
    "AttemptStart": "an Attempt's outcome records the instant of the claim that began it, and the claim "
    "hands its handler the job's Attempt number and enqueue time",
}


class Violation(Exception):
    """An invariant did not hold: ``name`` is one of :data:`INVARIANTS`."""

    def __init__(self, name: str, message: str, at: int) -> None:
        super().__init__(f"{name} at {at / 1e6:.6f}s: {message}")
        self.name, self.message, self.at = name, message, at


def storable(text: str, bound: int) -> bool:
    """Text any database stores, within ``bound`` bytes of UTF-8."""
    if "\x00" in text:
        return False
    try:
        return len(text.encode("utf-8")) <= bound
    except UnicodeEncodeError:  # a lone surrogate
        return False


class Checker:
    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.checks = 0
        self.jobs: dict[int, JobView] = {}
        self.claims: dict[int, tuple[str, int]] = {}  # job -> (owner, attempt) of its open Attempt
        self.leased: Counter[str] = Counter()  # leased jobs per queue
        self.paused: frozenset[str] = frozenset()
        self.limits: dict[str, int] = {}
        self.reporting: tuple[str, Mapping[int, int]] | None = None  # the report being written
        self.live = 0  # jobs not in a terminal state
        # (worker, job, attempt) whose handler returned -> what it returned (JSON text), or None
        self.returned: dict[tuple[str, int, int], str | None] = {}
        self.routable: Callable[[str], bool] = lambda wire_name: True
        self.schedules = ScheduleWatch(self)
        self.features = FeatureWatch(self)
        self.dependencies = DependencyWatch(self)
        self.purged = 0  # finished jobs retention deleted
        self.tags: dict[int, set[str]] = {}  # the tags each job was observed to gain

    def fail(self, name: str, message: str) -> None:
        raise Violation(name, message, self.clock())

    def expect(self, holds: bool, name: str, message: Callable[[], str]) -> None:
        self.checks += 1
        if not holds:
            self.fail(name, message())

    # -- the store's side: each change as it happens ------------------------------------------------

    def on_change(self, change: JobChange) -> None:
        job = change.after or change.before
        if job is not None and job.schedule is not None:
            self.schedules.changed(change)
        if change.after is None:
            self._purged(change)
            return
        after, before = change.after, change.before
        self.features.changed(change, after)
        self.dependencies.changed(change, after)
        self.live += (not after.state.is_terminal) - (before is not None and not before.state.is_terminal)
        if change.before is None:
            self.expect(
                after.state in INITIAL_STATES, "LegalTransition", lambda: f"job {after.id} born {after}"
            )
            self.expect(
                after.attempt == 0, "AttemptAccounting", lambda: f"job {after.id} born at {after.attempt}"
            )
        else:
            self._moved(change, change.before)
        self.expect(
            (after.state is State.LEASED) == (change.lease_after is not None),
            "LeaseMatchesState",
            lambda: f"job {after.id} is {after.state} with lease {change.lease_after}",
        )
        self._text(after.terminal_cause, MAX_MESSAGE_BYTES, f"job {after.id}'s terminal cause")
        if change.tags:
            self._tagged(change, after)
        self.jobs[after.id] = after

    def _tagged(self, change: JobChange, after: JobView) -> None:
        outcome = change.outcome
        if outcome is not None:  # an Attempt's tags: only its own, only with its applied outcome
            own = attempt_tag(outcome.attempt, outcome.worker)
            self.expect(
                set(change.tags) <= {own},
                "TagsFromFencedOutcome",
                lambda: f"job {after.id}'s {outcome.kind} of attempt {outcome.attempt} added {change.tags}",
            )
        self.tags.setdefault(after.id, set()).update(change.tags)

    def _purged(self, change: JobChange) -> None:
        """Retention deleted a job: only a finished one, as last seen, and never one that still runs."""
        before = change.before
        assert before is not None
        self.expect(
            before.state.is_terminal and before.id not in self.claims,
            "PurgeOnlyFinished",
            lambda: f"a purge deleted job {before.id} while it was {before.state}",
        )
        self.expect(
            self.jobs.get(before.id) == before,
            "NoJobLost",
            lambda: (
                f"job {before.id} changed unobserved before its purge: last seen {self.jobs.get(before.id)}"
            ),
        )
        del self.jobs[before.id]
        self.tags.pop(before.id, None)
        self.features.purged(before)
        self.purged += 1

    @staticmethod
    def _after(change: JobChange) -> JobView:
        assert change.after is not None  # only a purge deletes a job, and on_change takes purges first
        return change.after

    def _moved(self, change: JobChange, before: JobView) -> None:
        after, operation = self._after(change), change.operation
        self.expect(
            self.jobs.get(before.id) == before,
            "NoJobLost",
            lambda: f"job {before.id} changed unobserved: last seen {self.jobs.get(before.id)}, now {before}",
        )
        self.expect(
            after.trace_context == before.trace_context,
            "TraceContextKept",
            lambda: f"{operation} changed job {after.id}'s trace context to {after.trace_context!r}",
        )
        if change.outcome is not None:  # an Attempt ended: first, was it one that could end?
            self._ended(change, before)
        moved = before.state is not after.state
        self.expect(
            is_legal(before.state, after.state) if moved else operation in ("cancel", "resolve"),
            "LegalTransition",
            lambda: f"{operation} moved job {after.id} from {before.state} to {after.state}",
        )
        if change.outcome is not None:
            self._counted(after, change.outcome.kind, change.outcome.attempt, before.attempt)
        elif operation == "claim":
            self._claimed(change, before)
        elif operation == "requeue":
            self.expect(after.attempt == 0, "AttemptAccounting", lambda: f"requeue left {after.attempt}")
        else:
            self.expect(after.attempt == before.attempt, "AttemptAccounting", lambda: f"{operation}: {after}")

    def _claimed(self, change: JobChange, before: JobView) -> None:
        after, lease = self._after(change), change.lease_after
        self.expect(
            after.attempt == before.attempt + 1,
            "AttemptAccounting",
            lambda: f"a claim took job {after.id} from attempt {before.attempt} to {after.attempt}",
        )
        self.expect(
            after.attempt <= after.max_attempts,
            "AttemptCeiling",
            lambda: f"job {after.id} claimed for attempt {after.attempt} of {after.max_attempts}",
        )
        self.expect(
            after.queue not in self.paused,
            "PausedQueueNotClaimed",
            lambda: f"job {after.id} claimed from paused queue {after.queue}",
        )
        queue = after.queue
        self.leased[queue] += 1
        limit = self.limits.get(queue)
        self.expect(
            limit is None or self.leased[queue] <= limit,
            "ConcurrencyLimit",
            lambda: f"job {after.id}'s claim leaves {self.leased[queue]} leased in {queue} (limit {limit})",
        )
        if lease is not None:
            self.claims[after.id] = (lease.owner, lease.attempt)

    def _ended(self, change: JobChange, before: JobView) -> None:
        after, outcome, lease = self._after(change), change.outcome, change.lease_before
        assert outcome is not None
        self.leased[after.queue] -= before.state is State.LEASED
        claim = self.claims.pop(after.id, None)
        self.expect(
            claim is not None,
            "OneOutcomePerAttempt",
            lambda: (
                f"{change.operation} ended job {after.id} attempt {outcome.attempt} again ({outcome.kind})"
            ),
        )
        self.expect(
            claim == (outcome.worker, outcome.attempt),
            "OutcomeFromLeaseHolder",
            lambda: f"job {after.id}: {outcome.worker} ended attempt {outcome.attempt}, but {claim} held it",
        )
        live = lease is not None and lease.expires_at > change.now
        self.expect(
            live if change.operation == "report" else not live,
            "OutcomeFromLeaseHolder",
            lambda: f"job {after.id}: a {change.operation} at {change.now} on lease {lease}",
        )
        if change.operation == "report" and self.reporting is not None:
            worker, attempts = self.reporting
            self.expect(
                worker == outcome.worker and attempts.get(after.id) == outcome.attempt,
                "OutcomeFromLeaseHolder",
                lambda: f"job {after.id}: {worker} reported {attempts.get(after.id)}, applied as {outcome}",
            )
        self._matches_run(after, outcome.kind, outcome.worker, outcome.attempt)
        self.features.ended(after, outcome)
        self._text(outcome.message, MAX_MESSAGE_BYTES, f"job {after.id}'s outcome message")
        self._text(outcome.detail, MAX_DETAIL_BYTES, f"job {after.id}'s outcome detail")

    def _matches_run(self, after: JobView, kind: OutcomeKind, worker: str, attempt: int) -> None:
        if kind is OutcomeKind.SUCCEEDED:
            self.expect(
                (worker, after.id, attempt) in self.returned,
                "OutcomeMatchesRun",
                lambda: f"job {after.id} attempt {attempt} succeeded, but {worker}'s handler never returned",
            )
        elif kind is OutcomeKind.UNROUTABLE:
            self.expect(
                not self.routable(after.wire_name),
                "OutcomeMatchesRun",
                lambda: f"job {after.id} ({after.wire_name}) was quarantined but a handler is registered",
            )

    def _counted(self, after: JobView, kind: OutcomeKind, ended: int, before: int) -> None:
        given_back = kind is OutcomeKind.RELEASED
        self.expect(
            after.attempt == before - given_back,
            "AttemptAccounting",
            lambda: f"a {kind} outcome took job {after.id} from attempt {before} to {after.attempt}",
        )
        if kind in (OutcomeKind.FAILED, OutcomeKind.EXPIRED):
            retried, dead = after.state is State.SCHEDULED, after.state is State.DEAD_LETTERED
            self.expect(
                not (retried and ended >= after.max_attempts) and not (dead and ended < after.max_attempts),
                "AttemptCeiling",
                lambda: (
                    f"job {after.id} {after.state} after attempt {ended} of {after.max_attempts} ({kind})"
                ),
            )

    def _text(self, text: str, bound: int, what: str) -> None:
        self.expect(storable(text, bound), "StoredTextBounded", lambda: f"{what} is {text[:80]!r}...")

    # -- what the simulator tells it -----------------------------------------------------------------

    def queues_changed(self, views: Iterable[QueueView]) -> None:
        """The store's queue settings after an operator action (committed or not: read back)."""
        views = list(views)
        self.paused = frozenset(v.queue for v in views if v.paused)
        self.limits = {v.queue: v.concurrency_limit for v in views if v.concurrency_limit is not None}

    def pump_recorded(self, view: PumpView | None) -> None:
        if view is not None:
            self._text(view.detail, MAX_HEALTH_DETAIL_BYTES, f"{view.worker_id}'s health detail")

    def accepted(self, ids: Iterable[int]) -> None:
        """The client was told these jobs were enqueued."""
        for job_id in ids:
            self.checks += 1
            if job_id not in self.jobs:
                self.fail("NoJobLost", f"an enqueue acknowledged job {job_id}, which the store never made")

    def minter(self, store: MemoryStore, loaded: Loaded | None) -> Callable[..., int]:
        """``store.mint`` as a Pump calls it, watched (see ``schedule_checks``)."""
        return self.schedules.minter(store, loaded)

    def audit(
        self,
        stored: list[JobView],
        drained: bool,
        schedules: Sequence[ScheduleView] = (),
        tags: Mapping[int, frozenset[str]] | None = None,
    ) -> None:
        """At the end of a run: the store holds what was observed (its jobs, their tags), every schedule's
        ticks are accounted for, and after a drain, every job is terminal."""
        self.schedules.account(schedules)
        if tags is not None:
            observed = {job_id: frozenset(held) for job_id, held in self.tags.items() if held}
            self.expect(
                dict(tags) == observed,
                "TagsFromFencedOutcome",
                lambda: f"the store's tags differ from those observed on {_differing(tags, observed)[:5]}",
            )
        self.dependencies.audit(stored)
        self.expect(
            {j.id: j for j in stored} == self.jobs,
            "NoJobLost",
            lambda: f"the store holds {len(stored)} jobs, {len(self.jobs)} were observed (or they differ)",
        )
        if drained:
            stuck = [f"{j.id}:{j.queue}:{j.state}" for j in stored if not j.state.is_terminal]
            self.expect(not stuck, "DrainLiveness", lambda: f"not terminal after the drain: {stuck[:10]}")


def _differing(left: Mapping[int, frozenset[str]], right: Mapping[int, frozenset[str]]) -> list[int]:
    return sorted(job_id for job_id in {*left, *right} if left.get(job_id) != right.get(job_id))
