"""The table agreement: every store ends a leased job's Attempt exactly as ``core.transitions`` says.

For every row of ``LEASE_ENDINGS`` (how the Attempt ended x attempts left x cancel requested) a leased job is
set up in that situation in each store this run certifies (on PostgreSQL: the memory store, PostgresStore's
SQL and the portable ORM store; on SQLite: the memory and portable stores), the ending is applied (a report,
or the expiry sweep for EXPIRED), and the job and its Outcome row are read back through the contract. Every
store must end in the same job (state, attempt, due time, terminal time and cause, cancel flag) and the same
Outcome row, field for field, and that must be what the table's row says.

Retries use a policy without jitter, so the due times do not depend on the ids the stores gave the jobs
(``test_report.py`` and ``test_leases.py`` check the jitter per job).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import pytest

from backwave_django.core import transitions
from backwave_django.core.records import OutcomeKind
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import TRANSITIONS, State
from backwave_django.store.contract import CancelResult, JobStore, JobView, OutcomeDetail, OutcomeView

from ..conftest import LEASE, T0
from .support import WORKER, claim_one, enqueue_one, job, outcome, report, sweep

POLICY = RetryPolicy(max_attempts=10, backoff_base=2.0, backoff_cap=300.0, jitter=False)
DUE = T0 - timedelta(minutes=1)
REPORTED_AT = T0 + timedelta(seconds=10)
MESSAGE = "ValueError: the handler's own words"
TRACEBACK = 'Traceback (most recent call last):\n  File "jobs.py", line 3, in run\nValueError: the end'

Key = tuple[OutcomeKind, bool, bool]
ROWS: list[Key] = sorted(transitions.LEASE_ENDINGS, key=lambda k: (list(OutcomeKind).index(k[0]), k[1], k[2]))


def row_id(key: Key) -> str:
    kind, attempts_left, cancel_requested = key
    left = "attempts-left" if attempts_left else "at-ceiling"
    return f"{kind}-{left}-{'cancel-requested' if cancel_requested else 'no-cancel'}"


@dataclass(frozen=True)
class Ending:
    """How one job ended up, without what differs between stores by construction (its id and queue)."""

    job: JobView
    outcome: OutcomeView
    leased: bool


def leased_job(store: JobStore, key: Key, queue: str) -> tuple[int, object]:
    """A job of ``queue`` leased by WORKER at T0 (Attempt 1) in the situation of ``key``."""
    _, attempts_left, cancel_requested = key
    new = enqueue_one(store, queue=queue, due_at=DUE, max_attempts=3 if attempts_left else 1)
    claimed = claim_one(store, queues=[queue], now=T0)
    assert claimed.id == new.id
    if cancel_requested:
        assert store.cancel(new.id, actor="ops", now=T0) is CancelResult.REQUESTED
    return new.id, claimed


def end(store: JobStore, keys: list[Key], queue: str) -> list[Ending]:
    """Set up one leased job per key, end them all (one report batch, one sweep), read them back."""
    jobs = [leased_job(store, key, queue) for key in keys]
    reported = [(job_id, claimed, key) for (job_id, claimed), key in zip(jobs, keys, strict=True)]
    reports = [
        outcome(c, key[0], message=MESSAGE) for _, c, key in reported if key[0] is not OutcomeKind.EXPIRED
    ]
    details = {r.job_id: OutcomeDetail(traceback=TRACEBACK) for r in reports if r.kind is OutcomeKind.FAILED}
    if reports:
        result = report(store, *reports, retry=POLICY, now=REPORTED_AT, details=details)
        assert (result.applied, result.stale) == ({r.job_id for r in reports}, frozenset())
    expiring = len(reported) - len(reports)
    if expiring:
        assert sweep(store, queues=[queue], retry=POLICY, now=T0 + LEASE) == expiring
    endings = []
    for job_id, _, _ in reported:
        [row] = store.list_outcomes(job_id)
        view = job(store, job_id)
        endings.append(
            Ending(
                job=replace(view, id=0, queue=""),
                outcome=replace(row, job_id=0),
                leased=store.get_lease(job_id) is not None,
            )
        )
    return endings


def expected(key: Key) -> Ending:
    """What the table's row says, worked out by hand from the Rule (not by the code under test)."""
    kind, attempts_left, _ = key
    rule = transitions.LEASE_ENDINGS[key]
    ended_at = T0 + LEASE if kind is OutcomeKind.EXPIRED else REPORTED_AT
    cause = rule.cause.format(message=MESSAGE if kind is not OutcomeKind.EXPIRED else "", attempt=1)
    due: datetime = {
        transitions.Due.KEEP: DUE,
        transitions.Due.RETRY: ended_at + timedelta(seconds=2),  # 2 ** 1 seconds after Attempt 1
        transitions.Due.NOW: ended_at,
    }[rule.due]
    terminal = rule.state.is_terminal
    return Ending(
        job=JobView(
            id=0,
            wire_name="tests.noop",
            queue="",
            payload="{}",
            state=rule.state,
            attempt=1 + rule.attempt_delta,
            max_attempts=3 if attempts_left else 1,
            due_at=due,
            created_at=T0,
            terminal_at=ended_at if terminal else None,
            terminal_cause=cause if terminal else "",
            cancel_requested=False,
            timeout=None,
        ),
        outcome=OutcomeView(
            job_id=0,
            attempt=1,
            worker=WORKER,
            kind=kind,
            state_after=rule.state,
            message=cause,
            detail=TRACEBACK if kind is OutcomeKind.FAILED else "",
            recorded_at=ended_at,
            started_at=T0,  # the claim that began the Attempt
        ),
        leased=False,
    )


def test_the_table_covers_every_ending_in_every_situation_with_a_legal_move():
    assert set(ROWS) == {(k, left, c) for k in OutcomeKind for left in (True, False) for c in (True, False)}
    for key, rule in transitions.LEASE_ENDINGS.items():
        assert (State.LEASED, rule.state) in TRANSITIONS, row_id(key)


@pytest.mark.parametrize("key", ROWS, ids=[row_id(k) for k in ROWS])
def test_every_store_ends_an_attempt_as_the_tables_row_says(every_store, key):
    endings = {name: end(store, [key], queue=f"agreement-{name}")[0] for name, store in every_store.items()}

    want = expected(key)
    disagree = {name: ending for name, ending in endings.items() if ending != want}
    assert not disagree, f"{row_id(key)}: expected {want}, but {disagree}"


def test_every_store_ends_a_batch_of_every_ending_row_for_row_as_each_alone(every_store):
    """All the rows at once (one report batch of every reported kind, one sweep): a store that groups its
    writes (the portable store's UPDATEs, the SQL's arrays) must still give each row its own move."""
    endings = {name: end(store, ROWS, queue=f"batch-{name}") for name, store in every_store.items()}

    want = [expected(key) for key in ROWS]
    for name, got in endings.items():
        wrong = {row_id(k): g for k, g, w in zip(ROWS, got, want, strict=True) if g != w}
        assert not wrong, f"{name}: rows that differ from the table: {wrong}"
