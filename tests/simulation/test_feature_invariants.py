"""The invariants of priorities, unique keys, return values and Attempt facts, each tripped under its own name
by a violation made by hand; the clean lives of each trip nothing; and the scenarios really reach them.

A real MemoryStore observed by the checker makes the changes (a claim is judged whole through the watched
``claim``); a violation is a small subclass that breaks one rule, or a change written by hand.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy
from backwave_django.simulation.invariants import INVARIANTS, Checker, Violation
from backwave_django.simulation.run import run
from backwave_django.simulation.scenario import draw
from backwave_django.store.contract import (
    EnqueuedJob,
    NewJob,
    OutcomeDetail,
    RequeueResult,
)
from backwave_django.store.memory import JobChange, MemoryStore, TransientFault

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)
RETRY = RetryPolicy(max_attempts=3, backoff_base=2.0, backoff_cap=4.0)
WORKER = "node0:1:g0:0"


def observed(checker: Checker, store_class: type[MemoryStore] = MemoryStore) -> MemoryStore:
    return store_class(observe=checker.on_change)


def new(key: str | None = None, priority: int = 0, queue: str = "q0", due: datetime = T0) -> NewJob:
    return NewJob(
        wire_name="sim.job", payload="0", queue=queue, due_at=due, priority=priority, unique_key=key,
        max_attempts=1,
    )  # fmt: skip


def enqueue(checker: Checker, store: MemoryStore, job: NewJob) -> EnqueuedJob:
    [result] = store.enqueue([job], now=T0, max_payload_bytes=65536)
    checker.features.enqueued(job, result)
    return result


def claim(checker: Checker, store: MemoryStore, queues: list[str], max_jobs: int = 1) -> list[int]:
    claimed = checker.features.claimer(store)(
        worker_id=WORKER, queues=queues, max_jobs=max_jobs, lease_duration=LEASE, now=T0
    )
    return [job.id for job in claimed]


def succeed(checker: Checker, store: MemoryStore, job_id: int, output: str | None = None) -> None:
    checker.returned[WORKER, job_id, 1] = output
    report = OutcomeReport(job_id=job_id, attempt=1, kind=OutcomeKind.SUCCEEDED, max_attempts=1, message="")
    detail = {job_id: OutcomeDetail(output=output)}
    store.report(worker_id=WORKER, reports=[report], retry=RETRY, now=T0, details=detail)


# -- ClaimOrder -------------------------------------------------------------------------------------------


class ClaimsByDueTime(MemoryStore):
    def _due(self, queue: str, now: datetime, take: int) -> list[int]:
        due = [(self._jobs[i].due_at, i) for i in super()._due(queue, now, 1 << 62)]
        return [job_id for _, job_id in sorted(due)[:take]]


class ClaimsOneLess(MemoryStore):
    def _due(self, queue: str, now: datetime, take: int) -> list[int]:
        return super()._due(queue, now, take - 1)


def higher_left_behind(checker: Checker) -> None:
    store = observed(checker, ClaimsByDueTime)
    enqueue(checker, store, new(due=T0 - timedelta(seconds=1)))
    enqueue(checker, store, new(priority=5))
    claim(checker, store, ["q0"])


def test_a_claim_that_takes_fewer_than_it_may_breaks_the_claim_order():
    checker = Checker(lambda: 0)
    store = observed(checker, ClaimsOneLess)
    enqueue(checker, store, new())
    enqueue(checker, store, new())
    with pytest.raises(Violation, match=r"ClaimOrder.*room for 2"):
        claim(checker, store, ["q0"], max_jobs=2)


def test_a_claim_takes_queue_by_queue_by_priority_within_its_batch_limits_and_pauses():
    checker = Checker(lambda: 0)
    store = observed(checker)
    ids = [enqueue(checker, store, new(priority=p, queue=q)).id for p, q in ((0, "q0"), (9, "q0"), (5, "q1"))]
    enqueue(checker, store, new(priority=100, queue="q2"))
    enqueue(checker, store, new(priority=100, due=T0 + timedelta(seconds=1)))  # not due yet
    store.set_concurrency_limit("q1", 0, actor="op", now=T0)
    store.pause_queue("q2", actor="op", now=T0)
    checker.queues_changed(store.list_queues())
    assert claim(checker, store, ["q2", "q1", "q0"], max_jobs=1) == [ids[1]]
    assert claim(checker, store, ["q0", "q1"], max_jobs=3) == [ids[0]]
    assert claim(checker, store, ["q1", "q2"], max_jobs=3) == []


def test_a_claim_whose_reply_is_lost_is_judged_and_one_that_never_ran_is_not():
    checker = Checker(lambda: 0)
    armed = {"before": False, "after": False}

    def fault(operation: str, when: str) -> None:
        if armed[when]:
            raise TransientFault(f"{when} {operation}")

    store = ClaimsByDueTime(observe=checker.on_change, faults=fault)
    checker.features.fault_before = lambda: armed["before"]
    enqueue(checker, store, new(due=T0 - timedelta(seconds=1)))
    enqueue(checker, store, new(priority=5))
    armed["before"] = True
    with pytest.raises(TransientFault):
        claim(checker, store, ["q0"])
    armed["before"], armed["after"] = False, True
    with pytest.raises(Violation, match="ClaimOrder"):
        claim(checker, store, ["q0"])


# -- UniqueKeyHeldOnce, DuplicateIsHolder -----------------------------------------------------------------


class ForgetsKeys(MemoryStore):
    def _hold_key(self, old: Any, job: Any) -> None:
        pass


def key_held_twice(checker: Checker) -> None:
    store = observed(checker, ForgetsKeys)
    store.enqueue([new("k"), new("k")], now=T0, max_payload_bytes=65536)


def duplicate_of_a_finished_job(checker: Checker) -> None:
    store = observed(checker)
    first = enqueue(checker, store, new("k"))
    claim(checker, store, ["q0"])
    succeed(checker, store, first.id)
    checker.features.enqueued(new("k"), EnqueuedJob(id=first.id, duplicate=True))


def test_a_keyed_enqueue_that_made_a_job_beside_the_holder_is_not_a_holder():
    checker = Checker(lambda: 0)
    store = observed(checker)
    first = enqueue(checker, store, new("k"))
    with pytest.raises(Violation, match=r"DuplicateIsHolder.*made job 7"):
        checker.features.enqueued(new("k"), EnqueuedJob(id=7))
    assert enqueue(checker, store, new("k")) == EnqueuedJob(id=first.id, duplicate=True)


def test_a_requeue_refused_for_a_key_nobody_holds_is_a_lie():
    checker = Checker(lambda: 0)
    store = observed(checker)
    job = enqueue(checker, store, new("k"))
    claim(checker, store, ["q0"])
    report = OutcomeReport(job_id=job.id, attempt=1, kind=OutcomeKind.FAILED, max_attempts=1, message="no")
    store.report(worker_id=WORKER, reports=[report], retry=RETRY, now=T0)
    with pytest.raises(Violation, match="DuplicateIsHolder"):
        checker.features.requeued(job.id, RequeueResult.KEY_TAKEN)
    holder = enqueue(checker, store, new("k"))  # the key is free again: a new job holds it
    assert not holder.duplicate and store.requeue(job.id, actor="op", now=T0) is RequeueResult.KEY_TAKEN
    checker.features.requeued(job.id, RequeueResult.KEY_TAKEN)


# -- OutputFromSuccess ------------------------------------------------------------------------------------


def output_unlike_the_handlers(checker: Checker) -> None:
    store = observed(checker)
    job = enqueue(checker, store, new())
    claim(checker, store, ["q0"])
    checker.returned[WORKER, job.id, 1] = '"mine"'
    report = OutcomeReport(job_id=job.id, attempt=1, kind=OutcomeKind.SUCCEEDED, max_attempts=1, message="")
    details = {job.id: OutcomeDetail(output='"another Attempt\'s"')}
    store.report(worker_id=WORKER, reports=[report], retry=RETRY, now=T0, details=details)


class KeepsEveryOutput(MemoryStore):
    """Keeps the return value a report offers whatever the move (a failure's included)."""

    def report(self, *, details: Any = None, **rest: Any) -> Any:
        self.offered = {job_id: detail.output for job_id, detail in (details or {}).items()}
        return super().report(details=details, **rest)

    def _apply(self, moves: Any, now: datetime, operation: str) -> None:
        kept = [replace(change, output=self.offered.get(change.job_id)) for change in moves]
        super()._apply(kept if operation == "report" else moves, now, operation)


def test_a_failure_that_keeps_an_output_breaks_output_from_success():
    checker = Checker(lambda: 0)
    store = observed(checker, KeepsEveryOutput)
    job = enqueue(checker, store, new())
    claim(checker, store, ["q0"])
    report = OutcomeReport(job_id=job.id, attempt=1, kind=OutcomeKind.FAILED, max_attempts=1, message="no")
    details = {job.id: OutcomeDetail(traceback="...", output='"returned, then cut off"')}
    with pytest.raises(Violation, match=r"OutputFromSuccess.*dead_lettered.*no success wrote it"):
        store.report(worker_id=WORKER, reports=[report], retry=RETRY, now=T0, details=details)


def test_a_fenced_off_attempts_output_written_onto_a_succeeded_job_breaks_output_from_success():
    checker = Checker(lambda: 0)
    store = observed(checker)
    job = enqueue(checker, store, new())
    claim(checker, store, ["q0"])
    succeed(checker, store, job.id, json.dumps(f"{WORKER}/{job.id}/1"))
    done = store.get_job(job.id)
    assert done is not None and done.output == json.dumps(f"{WORKER}/{job.id}/1")
    stale = JobChange(operation="report", now=T0, before=done, after=replace(done, output='"stale"'))
    with pytest.raises(Violation, match="OutputFromSuccess"):
        checker.on_change(stale)


# -- AttemptStart -----------------------------------------------------------------------------------------


class StartsLater(MemoryStore):
    def _apply(self, moves: Any, now: datetime, operation: str) -> None:
        leases = {job_id: replace(lease, claimed_at=now + LEASE) for job_id, lease in self._leases.items()}
        self._leases.update(leases)
        super()._apply(moves, now, operation)


def outcome_starts_elsewhere(checker: Checker) -> None:
    store = observed(checker, StartsLater)
    job = enqueue(checker, store, new())
    claim(checker, store, ["q0"])
    succeed(checker, store, job.id)


class HandsAnotherEnqueueTime(MemoryStore):
    def claim(self, **request: Any) -> Any:
        return [replace(job, created_at=T0 - LEASE) for job in super().claim(**request)]


def test_a_claim_that_hands_the_wrong_enqueue_time_breaks_attempt_start():
    checker = Checker(lambda: 0)
    store = observed(checker, HandsAnotherEnqueueTime)
    enqueue(checker, store, new())
    with pytest.raises(Violation, match=r"AttemptStart.*enqueued at"):
        claim(checker, store, ["q0"])


HAND_MADE: dict[str, Callable[[Checker], None]] = {
    "ClaimOrder": higher_left_behind,
    "UniqueKeyHeldOnce": key_held_twice,
    "DuplicateIsHolder": duplicate_of_a_finished_job,
    "OutputFromSuccess": output_unlike_the_handlers,
    "AttemptStart": outcome_starts_elsewhere,
}


def test_each_is_a_named_invariant():
    assert set(HAND_MADE) <= set(INVARIANTS)


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_an_invariant_of_priorities_keys_or_outputs_trips_on_a_hand_made_violation(name):
    with pytest.raises(Violation) as raised:
        HAND_MADE[name](Checker(lambda: 0))
    assert raised.value.name == name


def test_a_clean_life_of_keys_priorities_and_outputs_trips_nothing():
    checker = Checker(lambda: 0)
    store = observed(checker)
    low, high = enqueue(checker, store, new("k")), enqueue(checker, store, new(priority=3))
    assert enqueue(checker, store, new("k")) == EnqueuedJob(id=low.id, duplicate=True)
    assert claim(checker, store, ["q0"], max_jobs=5) == [high.id, low.id]
    assert enqueue(checker, store, new("k")).duplicate  # while the holder runs
    succeed(checker, store, low.id, '"out"')
    again = enqueue(checker, store, new("k"))
    assert not again.duplicate and again.id != low.id
    checker.audit(store.all_jobs(), drained=False)
    assert checker.features.seen == Counter(
        {"scheduled": 1, "leased": 1, "duplicates": 2, "first": 1, "freed": 1}
    )


# -- the scenarios reach them ---------------------------------------------------------------------------


def test_scenarios_draw_priorities_keys_and_returning_handlers_from_a_stream_of_their_own():
    jobs = [job for seed in range(40) for job in draw(seed).jobs]
    assert 0.4 < sum(job.priority == 0 for job in jobs) / len(jobs) < 0.9
    assert {job.priority for job in jobs} >= {-100, 100} and len({job.priority for job in jobs}) > 20
    assert 0.1 < sum(job.unique_key is not None for job in jobs) / len(jobs) < 0.6
    assert 0.2 < sum(job.returns for job in jobs) / len(jobs) < 0.8
    plain = [(j.at, j.queue, j.duration) for j in draw(5).jobs]
    assert plain == [(j.at, j.queue, j.duration) for j in draw(5).jobs]


def test_duplicates_meet_holders_that_wait_run_are_retried_or_expired_and_keys_come_back_once_free():
    seen: Counter[str] = Counter()
    for seed in range(100):  # seeds 0, 1, 41 and 71 reach the four
        outcome = run(seed)
        assert outcome.violation is None
        seen.update(outcome.keys)
        if all(seen[kind] for kind in ("scheduled", "leased", "retried", "expired", "freed")):
            return
    raise AssertionError(f"not every case of a held key was reached: {seen}")
