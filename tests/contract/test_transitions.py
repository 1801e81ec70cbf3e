"""Transition legality: a seeded random walk of store operations only ever makes moves in ``TRANSITIONS``.

The walk speaks only the contract, so it runs on every store. After every operation it reads the jobs the
operation touched back through the contract's reads (the inspection helper tells which jobs' stored rows
changed, and that the store holds no job the walk did not enqueue) and checks: each job's state change is a
legal edge; a lease exists exactly while its job is leased (with the job's attempt); each Attempt that ended
wrote exactly one Outcome, whose ``state_after`` is the job's new state; the attempt counter moves only by a
claim (+1), a release (-1) and a requeue (to 0); a cancel request lives only on a leased job; terminal
fields are set exactly on terminal jobs; and no job ever runs more than ``max_attempts`` times.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from backwave_django.core.records import ClaimedJob, OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import INITIAL_STATES, TERMINAL_STATES, TRANSITIONS, State
from backwave_django.store.contract import JobStore, JobView, LeaseView, OutcomeDetail, OutcomeView

from ..conftest import T0
from .support import MAX_PAYLOAD, UNKNOWN_ID, inspect, new_job

WORKERS = ("host:1:g:a", "host:2:g:b", "host:3:g:c")
QUEUES = ("alpha", "beta")
POLICY = RetryPolicy(max_attempts=3, backoff_base=2.0, backoff_cap=60.0, jitter=True)
STEPS = 250
#: How a worker's report ends its Attempt (the store's own ending, EXPIRED, comes from the sweep).
REPORTED = [
    OutcomeKind.SUCCEEDED,
    OutcomeKind.FAILED,
    OutcomeKind.FAILED,
    OutcomeKind.CANCELLED,
    OutcomeKind.UNROUTABLE,
    OutcomeKind.RELEASED,
]


@dataclass
class Walk:
    """The random walk's state: the virtual clock, the jobs it enqueued, the Attempts workers believe
    they hold."""

    store: JobStore
    rng: random.Random
    now: datetime = T0
    ids: list[int] = field(default_factory=list)
    held: dict[str, dict[int, ClaimedJob]] = field(default_factory=lambda: {w: {} for w in WORKERS})
    operations: dict[str, int] = field(default_factory=dict)

    def step(self) -> None:
        self.now += timedelta(seconds=self.rng.choice([0, 0, 1, 2, 5, 15, 45]))
        name, action, _ = self.rng.choices(self.ACTIONS, weights=[weight for *_, weight in self.ACTIONS])[0]
        self.operations[name] = self.operations.get(name, 0) + 1
        action(self)

    # Each action may be stale on purpose: workers keep Attempts they have lost, and report them anyway.

    def enqueue(self) -> None:
        news = [
            new_job(
                queue=self.rng.choice(QUEUES),
                due_at=self.now + timedelta(seconds=self.rng.choice([-5, 0, 0, 30])),
                max_attempts=self.rng.randint(1, 3),
            )
            for _ in range(self.rng.randint(1, 2))
        ]
        self.ids += [e.id for e in self.store.enqueue(news, now=self.now, max_payload_bytes=MAX_PAYLOAD)]

    def claim(self) -> None:
        worker = self.rng.choice(WORKERS)
        claimed = self.store.claim(
            worker_id=worker,
            queues=self.rng.sample(QUEUES, k=self.rng.randint(1, 2)),
            max_jobs=self.rng.randint(1, 3),
            lease_duration=timedelta(seconds=self.rng.choice([30, 60, 120])),
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
        details = {
            r.job_id: OutcomeDetail(traceback="Traceback: boom")
            for r in reports
            if r.kind is OutcomeKind.FAILED
        }
        self.store.report(worker_id=worker, reports=reports, retry=POLICY, now=self.now, details=details)
        for i in picked:
            if self.rng.random() < 0.85:  # now and then a worker reports the same Attempt again later
                del self.held[worker][i]

    def _report_for(self, job: ClaimedJob) -> OutcomeReport:
        kind = self.rng.choice(REPORTED)
        attempt = job.attempt if self.rng.random() < 0.9 else job.attempt + 1
        return OutcomeReport(
            job_id=job.id, attempt=attempt, kind=kind, max_attempts=job.max_attempts, message=f"{kind}"
        )

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

    def shut_down(self) -> None:
        """A worker stops: every Attempt it believes it holds is released."""
        if worker := self.holder():
            reports = [
                OutcomeReport(
                    job_id=c.id, attempt=c.attempt, kind=OutcomeKind.RELEASED, max_attempts=c.max_attempts
                )
                for c in self.held[worker].values()
            ]
            self.store.report(worker_id=worker, reports=reports, retry=POLICY, now=self.now)
            self.held[worker].clear()

    def some_id(self) -> int:
        return self.rng.choice(self.ids) if self.ids and self.rng.random() < 0.95 else UNKNOWN_ID

    def cancel(self) -> None:
        self.store.cancel(self.some_id(), actor="ops", now=self.now)

    def requeue(self) -> None:
        self.store.requeue(self.some_id(), actor="ops", now=self.now)

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
        ("shut_down", shut_down, 1),
        ("cancel", cancel, 1),
        ("requeue", requeue, 1),
        ("queue_control", queue_control, 1),
    ]


@dataclass(frozen=True)
class Seen:
    """One job as the contract's reads show it."""

    job: JobView
    lease: LeaseView | None
    outcomes: list[OutcomeView]
    rows: object = field(default=None, compare=False)  # what the inspection helper saw of it


def read(
    store: JobStore, ids: list[int], before: dict[int, Seen], rows: dict[int, object]
) -> dict[int, Seen]:
    """Each job through the contract's reads; a job whose stored rows (``rows``: the inspection helper's)
    did not change since ``before`` keeps what was read then, which keeps the walk fast on a database."""
    seen = {}
    for job_id in ids:
        if job_id in before and rows.get(job_id) == before[job_id].rows:
            seen[job_id] = before[job_id]
            continue
        view = store.get_job(job_id)
        assert view is not None, f"job {job_id} vanished"
        seen[job_id] = Seen(view, store.get_lease(job_id), store.list_outcomes(job_id), rows.get(job_id))
    assert store.get_job(UNKNOWN_ID) is None
    return seen


def check_job(job_id: int, old: Seen | None, new: Seen, step: int) -> tuple[State, State] | None:
    """Check one job's invariants after a step; return its move, if it moved."""
    where = f"step {step}: job {job_id}"
    view, lease = new.job, new.lease
    assert (lease is not None) == (view.state is State.LEASED), f"{where}: lease {lease} in {view.state}"
    if lease is not None:
        assert (lease.attempt, lease.queue, lease.job_id) == (view.attempt, view.queue, job_id), where
    assert view.attempt <= view.max_attempts, f"{where} ran {view.attempt} > {view.max_attempts} times"
    assert view.cancel_requested <= (view.state is State.LEASED), f"{where}: cancel requested in {view.state}"
    assert (view.terminal_at is not None) == view.state.is_terminal, (
        f"{where}: terminal_at {view.terminal_at}"
    )
    if not view.state.is_terminal:
        assert view.terminal_cause == "", where
    if old is None:
        assert view.state in INITIAL_STATES and new.outcomes == [], f"{where} born {view.state}"
        return None
    before = old.job
    assert new.outcomes[: len(old.outcomes)] == old.outcomes, f"{where}: an Outcome was rewritten"
    added = new.outcomes[len(old.outcomes) :]
    ended = before.state is State.LEASED and view.state is not State.LEASED
    assert len(added) == int(ended), f"{where}: {len(added)} Outcomes for {before.state} -> {view.state}"
    if ended:
        [row] = added
        released = row.kind is OutcomeKind.RELEASED and view.state is State.SCHEDULED
        assert (row.state_after, row.attempt) == (view.state, before.attempt), where
        assert view.attempt == before.attempt - released, (
            f"{where}: attempt {before.attempt} -> {view.attempt}"
        )
    elif (before.state, view.state) == (State.SCHEDULED, State.LEASED):
        assert view.attempt == before.attempt + 1, f"{where}: a claim moved attempt to {view.attempt}"
    elif view.state is State.SCHEDULED and before.state.is_terminal:
        assert view.attempt == 0, f"{where}: a requeue left attempt {view.attempt}"
    else:
        assert view.attempt == before.attempt, f"{where}: attempt {before.attempt} -> {view.attempt}"
    if before.state is view.state:
        return None
    assert (before.state, view.state) in TRANSITIONS, f"{where} moved {before.state} -> {view.state}"
    return before.state, view.state


@pytest.mark.parametrize("seed", [1, 2026, 31337, 424242])
def test_a_random_walk_of_store_operations_makes_only_legal_transitions(store, seed):
    walk = Walk(store=store, rng=random.Random(seed))
    inspection = inspect(store)
    walk.enqueue()
    before = read(store, walk.ids, {}, inspection.rows_by_job())
    moves: set[tuple[State, State]] = set()

    for step in range(STEPS):
        walk.step()
        rows = inspection.rows_by_job()
        assert set(rows) == set(walk.ids), f"step {step}: the store holds jobs the walk never enqueued"
        after = read(store, walk.ids, before, rows)
        for job_id, seen in after.items():
            if move := check_job(job_id, before.get(job_id), seen, step):
                moves.add(move)
        before = after

    kinds = {row.kind for seen in before.values() for row in seen.outcomes}
    # the walk is long enough to exercise the interesting edges, or it proves little
    assert (State.SCHEDULED, State.LEASED) in moves
    assert {(State.LEASED, s) for s in TERMINAL_STATES} & moves
    assert (State.LEASED, State.SCHEDULED) in moves
    assert {OutcomeKind.EXPIRED, OutcomeKind.RELEASED, OutcomeKind.FAILED} <= kinds
    assert len(before) >= 5
