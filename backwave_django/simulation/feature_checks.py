"""The invariants of what jobs gained with issue 14: claim order, unique keys, return values, Attempt facts.

The checker hands this watch every change the store makes to a job (``observe``), so it keeps, cheaply, the
few mirrors its checks need: the scheduled jobs of each queue (what a claim could have taken), the job that
holds each unique key, and when each open Attempt was claimed. A claim is judged whole: the simulated Pump
calls the store's ``claim`` through :meth:`FeatureWatch.claimer`, which collects the jobs the call took and
compares them, queue by queue, with what was scheduled and due at the instant the claim was made (its
``now``), including a claim whose reply is lost after it committed. An enqueue's and a requeue's answers are
judged by the client and the operator as they get them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..core.records import ClaimedJob, OutcomeKind
from ..core.states import State
from ..store.contract import EnqueuedJob, JobView, NewJob, OutcomeView, RequeueResult
from ..store.memory import JobChange, MemoryStore, TransientFault

if TYPE_CHECKING:
    from .invariants import Checker

Key = tuple[str, str]  # (wire name, unique key)
UNLIMITED = 1 << 62


def rank(job: JobView) -> tuple[int, datetime, int]:
    """The claim order within a queue: higher priority first, then the earlier due time, then the lower id."""
    return (-job.priority, job.due_at, job.id)


class FeatureWatch:
    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self.waiting: dict[str, dict[int, JobView]] = {}  # scheduled jobs, by queue and id
        self.holders: dict[Key, int] = {}  # the unfinished job holding each key
        self.claimed_at: dict[int, datetime] = {}  # job -> the instant its open Attempt was claimed
        self.ending: dict[int, OutcomeKind] = {}  # job -> how its last Attempt ended
        self.keys_seen: set[Key] = set()
        self.taking: list[JobView] | None = None  # during a claim call: the jobs it took, as they were
        self.fault_before: Callable[[], bool] = lambda: False  # is the call failing before it commits?
        self.seen: Counter[str] = Counter()  # what duplicates met, for the tests and the summary

    # -- each change to a job --------------------------------------------------------------------

    def changed(self, change: JobChange, after: JobView) -> None:
        """Before the other checks (a change that moves nothing must still be judged for its output)."""
        before = change.before
        if before is not None and before.state is State.SCHEDULED:
            self.waiting[before.queue].pop(before.id, None)
        if after.state is State.SCHEDULED:
            self.waiting.setdefault(after.queue, {})[after.id] = after
        if after.unique_key is not None:
            self._holds(after)
        if after.output is not None or change.outcome is not None:
            self._output(change, after)
        if change.operation == "claim":
            self.claimed_at[after.id] = change.now
            if self.taking is not None and before is not None:
                self.taking.append(before)

    def ended(self, after: JobView, outcome: OutcomeView) -> None:
        """An Attempt ended (after the checks of who ended it): its outcome says when it began."""
        self.ending[after.id] = outcome.kind
        started = self.claimed_at.pop(after.id, None)
        if started is None:  # no open Attempt: OneOutcomePerAttempt has said so
            return
        self.checker.expect(
            outcome.started_at == started,
            "AttemptStart",
            lambda: (
                f"job {after.id} attempt {outcome.attempt} began at {started}, its outcome says "
                f"{outcome.started_at}"
            ),
        )

    def purged(self, before: JobView) -> None:
        if before.state is State.SCHEDULED:
            self.waiting[before.queue].pop(before.id, None)
        if before.unique_key is not None and self.holders.get(self._key(before)) == before.id:
            del self.holders[self._key(before)]

    @staticmethod
    def _key(job: JobView) -> Key:
        assert job.unique_key is not None
        return (job.wire_name, job.unique_key)

    def _holds(self, after: JobView) -> None:
        key = self._key(after)
        holder = self.holders.get(key)
        if after.state.is_terminal:
            if holder == after.id:
                del self.holders[key]
            return
        self.checker.expect(
            holder is None or holder == after.id,
            "UniqueKeyHeldOnce",
            lambda: f"job {after.id} ({after.state}) holds {key}, which unfinished job {holder} holds",
        )
        self.holders[key] = after.id

    def _output(self, change: JobChange, after: JobView) -> None:
        outcome, before = change.outcome, change.before
        success = outcome is not None and outcome.kind is OutcomeKind.SUCCEEDED
        if outcome is not None and success:
            expected = self.checker.returned.get((outcome.worker, after.id, outcome.attempt))
        else:  # anything else keeps the output of a succeeded job as it was, or holds none
            expected = before.output if before is not None and after.state is State.SUCCEEDED else None
        self.checker.expect(
            after.output == expected,
            "OutputFromSuccess",
            lambda: (
                f"{change.operation} left job {after.id} ({after.state}) with output {after.output!r}; "
                + (f"the Attempt that succeeded returned {expected!r}" if success else "no success wrote it")
            ),
        )

    # -- what the client and the operator are told ------------------------------------------------

    def enqueued(self, new: NewJob, result: EnqueuedJob) -> None:
        """The client's enqueue of ``new`` came back as ``result``."""
        key = (new.wire_name, new.unique_key) if new.unique_key is not None else None
        holder = self.holders.get(key) if key is not None else None
        if result.duplicate:
            self.checker.expect(
                key is not None and holder == result.id,
                "DuplicateIsHolder",
                lambda: f"an enqueue of {key} came back as a duplicate of job {result.id}; {holder} holds it",
            )
            self._met(result.id)
        elif key is not None and not result.state.is_terminal:  # one born cancelled holds no key
            self.checker.expect(
                holder == result.id,
                "DuplicateIsHolder",
                lambda: f"an enqueue of {key} made job {result.id}, but job {holder} holds the key",
            )
            self.seen["freed" if key in self.keys_seen else "first"] += 1
            self.keys_seen.add(key)

    def _met(self, holder: int) -> None:
        job = self.checker.jobs[holder]
        if job.state is State.SCHEDULED and holder in self.ending:
            self.seen["expired" if self.ending[holder] is OutcomeKind.EXPIRED else "retried"] += 1
        else:
            self.seen[str(job.state)] += 1
        self.seen["duplicates"] += 1

    def requeued(self, job_id: int, result: RequeueResult) -> None:
        """The operator's requeue of ``job_id`` came back as ``result``."""
        if result is not RequeueResult.KEY_TAKEN:
            return  # a requeue that went ahead is judged by UniqueKeyHeldOnce
        job = self.checker.jobs.get(job_id)
        holder = self.holders.get(self._key(job)) if job is not None and job.unique_key else None
        self.checker.expect(
            holder is not None and holder != job_id,
            "DuplicateIsHolder",
            lambda: f"a requeue of job {job_id} was refused KEY_TAKEN, but no other job holds its key",
        )
        self.seen["key-taken"] += 1

    # -- each claim, whole ------------------------------------------------------------------------

    def claimer(self, store: MemoryStore) -> Callable[..., list[ClaimedJob]]:
        """``store.claim``, watched: what each call took is judged against what it could have taken."""

        def claim(
            *, worker_id: str, queues: Sequence[str], max_jobs: int, lease_duration: timedelta, now: datetime
        ) -> list[ClaimedJob]:
            taken: list[JobView] = []
            self.taking = taken
            try:
                jobs = store.claim(
                    worker_id=worker_id, queues=queues, max_jobs=max_jobs, lease_duration=lease_duration,
                    now=now,
                )  # fmt: skip
            except TransientFault:  # after a commit, what it took is judged all the same
                if not self.fault_before():
                    self._ordered(worker_id, queues, max_jobs, now, taken)
                raise
            finally:
                self.taking = None
            self._ordered(worker_id, queues, max_jobs, now, taken)
            self._handed(jobs)
            return jobs

        claim.__name__ = "claim"
        return claim

    def _ordered(
        self, worker: str, queues: Sequence[str], max_jobs: int, now: datetime, taken: Iterable[JobView]
    ) -> None:
        """Queue by queue, in the order asked, the claim took the first due jobs in claim order, as many as
        its batch, the queue's free slots and the due jobs allowed."""
        budget = max_jobs
        by_queue: dict[str, list[JobView]] = {}
        for job in taken:
            by_queue.setdefault(job.queue, []).append(job)
        for queue in dict.fromkeys(queues):
            got = by_queue.pop(queue, [])
            waiting = self.waiting.get(queue)
            left = [job for job in waiting.values() if job.due_at <= now] if waiting else []
            if got or left:
                self._took_first(worker, queue, now, got, left, min(budget, self._free(queue, len(got))))
            budget -= len(got)
        self.checker.expect(
            not by_queue,
            "ClaimOrder",
            lambda: f"{worker}'s claim of {list(queues)} took jobs of {sorted(by_queue)}",
        )

    def _took_first(
        self, worker: str, queue: str, now: datetime, got: list[JobView], left: list[JobView], room: int
    ) -> None:
        ranked = sorted(got + left, key=rank)
        first = {job.id for job in ranked[: max(room, 0)]}
        self.checker.expect(
            {job.id for job in got} == first,
            "ClaimOrder",
            lambda: (
                f"{worker}'s claim of {queue} at {now} (room for {room}) took "
                f"{[(j.id, j.priority) for j in sorted(got, key=rank)]}, the first were "
                f"{[(j.id, j.priority) for j in ranked[: max(room, 0)]]}"
            ),
        )

    def _free(self, queue: str, got: int) -> int:
        """The free slots ``queue`` had when the claim began (it took ``got``)."""
        checker = self.checker
        if queue in checker.paused:
            return 0
        limit = checker.limits.get(queue)
        return UNLIMITED if limit is None else max(0, limit - (checker.leased[queue] - got))

    def _handed(self, jobs: Sequence[ClaimedJob]) -> None:
        """What a claim hands each handler is the job as stored: its Attempt and its enqueue time."""
        for claimed in jobs:
            self._handed_one(claimed, self.checker.jobs[claimed.id])

    def _handed_one(self, claimed: ClaimedJob, job: JobView) -> None:
        self.checker.expect(
            (claimed.attempt, claimed.created_at) == (job.attempt, job.created_at),
            "AttemptStart",
            lambda: (
                f"a claim handed job {claimed.id} as attempt {claimed.attempt} enqueued at "
                f"{claimed.created_at}; it is attempt {job.attempt}, enqueued at {job.created_at}"
            ),
        )
