"""Transition legality: a seeded random walk of store operations only ever makes moves in ``TRANSITIONS``.

After every operation the whole store is read back and checked: each job's state change is a legal edge, a
Lease exists exactly while its job is leased (with the job's attempt), each Attempt that ended wrote exactly
one Outcome whose ``state_after`` is the job's new state, and no job ever runs more than ``max_attempts``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from backwave_django.core.records import ClaimedJob, OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import INITIAL_STATES, TERMINAL_STATES, TRANSITIONS, State
from backwave_django.models import Job, Lease, Outcome
from backwave_django.store.django import DjangoStore

from ..conftest import T0
from .support import MAX_PAYLOAD, new_job

pytestmark = pytest.mark.django_db

WORKERS = ("host:1:g:a", "host:2:g:b", "host:3:g:c")
QUEUES = ("alpha", "beta")
POLICY = RetryPolicy(max_attempts=3, backoff_base=2.0, backoff_cap=60.0, jitter=False)
STEPS = 250


@dataclass
class Walk:
    """The random walk's state: the virtual clock and the Attempts the workers believe they hold."""

    store: DjangoStore
    rng: random.Random
    now: datetime = T0
    held: dict[str, dict[int, ClaimedJob]] = field(default_factory=lambda: {w: {} for w in WORKERS})
    operations: dict[str, int] = field(default_factory=dict)

    def step(self) -> None:
        self.now += timedelta(seconds=self.rng.choice([0, 0, 1, 2, 5, 15, 45]))
        name, action, _ = self.rng.choices(self.ACTIONS, weights=[weight for *_, weight in self.ACTIONS])[0]
        self.operations[name] = self.operations.get(name, 0) + 1
        action(self)

    # Each action may be stale on purpose: workers keep Attempts they have lost, and report them anyway.

    def enqueue(self) -> None:
        count = self.rng.randint(1, 2)
        news = [
            new_job(
                queue=self.rng.choice(QUEUES),
                due_at=self.now + timedelta(seconds=self.rng.choice([-5, 0, 0, 30])),
                max_attempts=self.rng.randint(1, 3),
            )
            for _ in range(count)
        ]
        self.store.enqueue(news, now=self.now, max_payload_bytes=MAX_PAYLOAD)

    def claim(self) -> None:
        worker = self.rng.choice(WORKERS)
        queues = self.rng.sample(QUEUES, k=self.rng.randint(1, 2))
        lease = timedelta(seconds=self.rng.choice([30, 60, 120]))
        claimed = self.store.claim(
            worker_id=worker,
            queues=queues,
            max_jobs=self.rng.randint(1, 3),
            lease_duration=lease,
            now=self.now,
        )
        self.held[worker].update({c.id: c for c in claimed})

    def holder(self) -> str | None:
        """A worker that believes it holds some Attempt (it may have lost them all)."""
        holders = [w for w in WORKERS if self.held[w]]
        return self.rng.choice(holders) if holders else None

    def report(self) -> None:
        if (worker := self.holder()) is None:
            return
        picked = self.rng.sample(sorted(self.held[worker]), k=self.rng.randint(1, len(self.held[worker])))
        reports = [self._report_for(self.held[worker][i]) for i in picked]
        details = {r.job_id: "Traceback: boom" for r in reports if r.kind is OutcomeKind.FAILED}
        self.store.report(worker_id=worker, reports=reports, now=self.now, details=details)
        for i in picked:
            if self.rng.random() < 0.85:  # now and then a worker reports the same Attempt again later
                del self.held[worker][i]

    def _report_for(self, job: ClaimedJob) -> OutcomeReport:
        kind = self.rng.choice(
            [
                OutcomeKind.SUCCEEDED,
                OutcomeKind.FAILED,
                OutcomeKind.FAILED,
                OutcomeKind.CANCELLED,
                OutcomeKind.UNROUTABLE,
            ]
        )
        retry_at = (
            POLICY.next_attempt_at(job.attempt, job.max_attempts, self.now)
            if kind is OutcomeKind.FAILED
            else None
        )
        attempt = job.attempt if self.rng.random() < 0.9 else job.attempt + 1
        return OutcomeReport(job_id=job.id, attempt=attempt, kind=kind, retry_at=retry_at, message=f"{kind}")

    def heartbeat(self) -> None:
        if worker := self.holder():
            self.store.heartbeat(
                worker_id=worker,
                job_ids=sorted(self.held[worker]),
                lease_duration=timedelta(seconds=60),
                now=self.now,
            )

    def expire(self) -> None:
        queues = self.rng.sample(QUEUES, k=self.rng.randint(0, 2))
        self.store.expire_leases(queues=queues, max_jobs=self.rng.randint(1, 4), retry=POLICY, now=self.now)

    def release(self) -> None:
        if worker := self.holder():
            self.store.release(worker_id=worker, job_ids=sorted(self.held[worker]), now=self.now)
            self.held[worker].clear()

    def cancel(self) -> None:
        if ids := list(Job.objects.values_list("id", flat=True)):
            self.store.cancel(self.rng.choice(ids), actor="ops", now=self.now)

    def requeue(self) -> None:
        if ids := list(Job.objects.values_list("id", flat=True)):
            self.store.requeue(self.rng.choice(ids), actor="ops", now=self.now)

    def queue_control(self) -> None:
        queue = self.rng.choice(QUEUES)
        match self.rng.randint(0, 3):
            case 0:
                self.store.pause_queue(queue, actor="ops", now=self.now)
            case 1 | 2:
                self.store.resume_queue(queue, actor="ops", now=self.now)
            case _:
                limit = self.rng.choice([None, None, 0, 1, 2, 5])
                self.store.set_concurrency_limit(queue, limit, actor="ops", now=self.now)

    ACTIONS = [  # (name, operation, weight)
        ("enqueue", enqueue, 2),
        ("claim", claim, 6),
        ("report", report, 6),
        ("heartbeat", heartbeat, 2),
        ("expire", expire, 3),
        ("release", release, 1),
        ("cancel", cancel, 1),
        ("requeue", requeue, 1),
        ("queue_control", queue_control, 1),
    ]


def read_store() -> tuple[dict[int, tuple[State, int, int]], dict[int, tuple[int, str]], list[Outcome]]:
    jobs = {
        i: (State(s), a, m)
        for i, s, a, m in Job.objects.values_list("id", "state", "attempt", "max_attempts")
    }
    leases = {i: (a, q) for i, a, q in Lease.objects.values_list("job_id", "attempt", "queue")}
    return jobs, leases, list(Outcome.objects.order_by("id"))


def check_step(before, after, step: int) -> list[tuple[State, State]]:
    jobs_before, _, outcomes_before = before
    jobs_after, leases_after, outcomes_after = after
    new_outcomes = outcomes_after[len(outcomes_before) :]
    assert outcomes_after[: len(outcomes_before)] == outcomes_before, f"step {step}: an Outcome was rewritten"
    by_job = {o.job_id: o for o in new_outcomes}
    assert len(by_job) == len(new_outcomes), f"step {step}: two Outcomes for one job in one operation"
    moves = []
    for job_id, (state, attempt, max_attempts) in jobs_after.items():
        if job_id not in jobs_before:
            assert state in INITIAL_STATES, f"step {step}: job {job_id} born {state}"
        elif (old := jobs_before[job_id][0]) != state:
            assert (old, state) in TRANSITIONS, f"step {step}: job {job_id} moved {old} -> {state}"
            moves.append((old, state))
        ended_an_attempt = (
            job_id in jobs_before and jobs_before[job_id][0] is State.LEASED and state is not State.LEASED
        )
        if ended_an_attempt:
            assert job_id in by_job, f"step {step}: job {job_id} left leased without an Outcome"
            assert State(by_job[job_id].state_after) is state
            assert by_job[job_id].attempt == jobs_before[job_id][1]
        else:
            assert job_id not in by_job, f"step {step}: job {job_id} got an Outcome without ending an Attempt"
        assert (job_id in leases_after) == (state is State.LEASED), (
            f"step {step}: job {job_id} lease mismatch"
        )
        if state is State.LEASED:
            assert leases_after[job_id][0] == attempt
        assert attempt <= max_attempts, f"step {step}: job {job_id} ran {attempt} > {max_attempts} times"
    assert set(jobs_before) <= set(jobs_after), f"step {step}: a job vanished"
    return moves


@pytest.mark.parametrize("seed", [1, 2026, 31337, 424242])
def test_a_random_walk_of_store_operations_makes_only_legal_transitions(store, seed):
    walk = Walk(store=store, rng=random.Random(seed))
    walk.enqueue()
    before = read_store()
    seen: set[tuple[State, State]] = set()

    for step in range(STEPS):
        walk.step()
        after = read_store()
        seen.update(check_step(before, after, step))
        before = after

    jobs, _, outcomes = before
    for row in outcomes:
        assert (State.LEASED, State(row.state_after)) in TRANSITIONS
        assert row.kind in {k.value for k in OutcomeKind}
    # the walk is long enough to exercise the interesting edges, or it proves little
    assert (State.SCHEDULED, State.LEASED) in seen
    assert {(State.LEASED, s) for s in TERMINAL_STATES} & seen
    assert (State.LEASED, State.SCHEDULED) in seen
    assert len(jobs) >= 5
