"""Where a job goes next: the lease-ending table, the retry decision, the operator tables, and the check that
every move a table names is legal."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.core import transitions
from backwave_django.core.records import OutcomeKind
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import TERMINAL_STATES, State, is_legal
from backwave_django.core.transitions import (
    CANCELS,
    LEASE_ENDINGS,
    OPERATOR_CANCEL,
    REQUEUES,
    CancelEffect,
    IllegalTransition,
    Move,
    Rule,
    after_attempt,
    can_requeue,
    cancel_cause,
    cancel_effect,
    check,
    check_purge,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
EXACT = RetryPolicy(jitter=False)
K = OutcomeKind
S = State


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def move(
    kind: OutcomeKind,
    *,
    attempt: int = 1,
    max_attempts: int = 10,
    cancel_requested: bool = False,
    message: str = "boom",
    retry: RetryPolicy = EXACT,
    job_id: int = 1,
) -> Move:
    return after_attempt(
        kind,
        job_id=job_id,
        attempt=attempt,
        max_attempts=max_attempts,
        cancel_requested=cancel_requested,
        message=message,
        retry=retry,
        now=NOW,
    )


# -- the lease-ending table -------------------------------------------------------------------------------


def test_the_lease_ending_table_has_a_row_for_every_ending_attempts_left_and_cancel_request():
    assert set(LEASE_ENDINGS) == set(itertools.product(OutcomeKind, (True, False), (True, False)))


ROW_IDS = [
    f"{kind} {'attempts left' if left else 'at the ceiling'}{', cancel asked' * cancel}"
    for kind, left, cancel in LEASE_ENDINGS
]


@pytest.mark.parametrize("rule", LEASE_ENDINGS.values(), ids=ROW_IDS)
def test_every_row_of_the_lease_ending_table_is_a_legal_move_from_leased(rule):
    assert is_legal(S.LEASED, rule.state)
    assert rule.due is transitions.Due.KEEP or rule.state is S.SCHEDULED  # a due time only for a retry


@pytest.mark.parametrize("kind", [K.SUCCEEDED, K.CANCELLED, K.UNROUTABLE, K.RELEASED])
def test_attempts_left_matter_only_for_a_failure_or_an_expiry(kind):
    for cancel in (True, False):
        assert LEASE_ENDINGS[kind, True, cancel] == LEASE_ENDINGS[kind, False, cancel]


@pytest.mark.parametrize("kind", [K.FAILED, K.CANCELLED, K.EXPIRED, K.RELEASED])
def test_a_cancel_request_ends_every_ending_but_success_and_unroutable_in_cancelled(kind):
    assert {LEASE_ENDINGS[kind, left, True].state for left in (True, False)} == {S.CANCELLED}


def test_only_a_release_gives_the_attempt_back():
    given_back = {key for key, rule in LEASE_ENDINGS.items() if rule.attempt_delta}
    assert given_back == {
        (K.RELEASED, retries, cancel) for retries in (True, False) for cancel in (True, False)
    }
    assert LEASE_ENDINGS[K.RELEASED, True, False].attempt_delta == -1


# -- after an Attempt: the retry decision and the ceiling ---------------------------------------------------

RETRIES = [
    pytest.param(1, 10, at(2), id="a first failure retries in 2 s"),
    pytest.param(4, 10, at(16), id="a fourth failure retries in 16 s"),
    pytest.param(9, 10, at(300), id="a ninth failure retries at the 300 s cap"),
    pytest.param(10, 10, None, id="a tenth failure dead-letters"),
    pytest.param(3, 3, None, id="the job's own lower ceiling dead-letters"),
    pytest.param(10, 12, at(300), id="the job's own higher ceiling still retries"),
    pytest.param(11, 10, None, id="an attempt past the ceiling dead-letters"),
]


@pytest.mark.parametrize(("attempt", "max_attempts", "due_at"), RETRIES)
def test_a_failure_retries_with_backoff_until_the_ceiling(attempt, max_attempts, due_at):
    result = move(K.FAILED, attempt=attempt, max_attempts=max_attempts, message="ValueError: bad input")
    expected_state = S.SCHEDULED if due_at else S.DEAD_LETTERED
    assert result == Move(state=expected_state, attempt_delta=0, due_at=due_at, cause="ValueError: bad input")
    assert result.is_terminal is (due_at is None)


def test_the_retry_decision_uses_the_given_policy():
    policy = RetryPolicy(backoff_base=3, backoff_cap=60, jitter=False)
    assert move(K.FAILED, attempt=2, retry=policy).due_at == at(9)
    assert move(K.FAILED, attempt=5, retry=policy).due_at == at(60)
    assert move(K.FAILED, attempt=2, max_attempts=2, retry=policy).state is S.DEAD_LETTERED


def test_with_jitter_a_retry_waits_a_share_of_the_backoff_the_same_on_every_replay():
    jittered = RetryPolicy()
    waits = {
        job_id: move(K.FAILED, attempt=4, retry=jittered, job_id=job_id).due_at for job_id in range(1, 50)
    }
    assert all(NOW <= due_at <= at(16) for due_at in waits.values())
    assert len(set(waits.values())) > 40, "jobs that failed together should retry apart"
    assert move(K.FAILED, attempt=4, retry=jittered, job_id=7).due_at == waits[7]


ENDINGS = [
    pytest.param(
        dict(kind=K.SUCCEEDED), Move(state=S.SUCCEEDED, attempt_delta=0, due_at=None, cause=""), id="success"
    ),
    pytest.param(
        dict(kind=K.SUCCEEDED, cancel_requested=True),
        Move(state=S.SUCCEEDED, attempt_delta=0, due_at=None, cause=""),
        id="a handler that returned succeeded, though a cancel was asked for",
    ),
    pytest.param(
        dict(kind=K.FAILED, cancel_requested=True),
        Move(state=S.CANCELLED, attempt_delta=0, due_at=None, cause=OPERATOR_CANCEL),
        id="a failure after a cancel request is a cancellation, never retried",
    ),
    pytest.param(
        dict(kind=K.CANCELLED),
        Move(state=S.CANCELLED, attempt_delta=0, due_at=None, cause=OPERATOR_CANCEL),
        id="a handler that stopped for an operator is cancelled",
    ),
    pytest.param(
        dict(kind=K.UNROUTABLE, message="no handler for 'tests.gone'"),
        Move(state=S.QUARANTINED, attempt_delta=0, due_at=None, cause="no handler for 'tests.gone'"),
        id="unroutable is quarantined with its reason, never retried",
    ),
    pytest.param(
        dict(kind=K.EXPIRED, attempt=2),
        Move(state=S.SCHEDULED, attempt_delta=0, due_at=at(4), cause="lease expired on attempt 2"),
        id="an expired lease counts as an Attempt and retries",
    ),
    pytest.param(
        dict(kind=K.EXPIRED, attempt=10),
        Move(
            state=S.DEAD_LETTERED,
            attempt_delta=0,
            due_at=None,
            cause="lease expired on attempt 10 (ceiling reached)",
        ),
        id="an expired lease at the ceiling dead-letters",
    ),
    pytest.param(
        dict(kind=K.EXPIRED, cancel_requested=True),
        Move(state=S.CANCELLED, attempt_delta=0, due_at=None, cause=f"{OPERATOR_CANCEL} (its lease expired)"),
        id="an expired lease of a job an operator cancelled is cancelled",
    ),
    pytest.param(
        dict(kind=K.RELEASED, attempt=10),
        Move(state=S.SCHEDULED, attempt_delta=-1, due_at=NOW, cause="released at shutdown"),
        id="a release at shutdown runs again at once, uncounted, even at the ceiling",
    ),
    pytest.param(
        dict(kind=K.RELEASED, cancel_requested=True),
        Move(state=S.CANCELLED, attempt_delta=-1, due_at=None, cause=OPERATOR_CANCEL),
        id="a release of a job an operator cancelled is cancelled, the Attempt given back",
    ),
]


@pytest.mark.parametrize(("facts", "expected"), ENDINGS)
def test_each_ending_moves_the_job_as_the_table_says(facts, expected):
    assert move(facts.pop("kind"), **facts) == expected


# -- the operator tables ----------------------------------------------------------------------------------


def test_the_cancel_table_covers_every_state():
    assert set(CANCELS) == set(State)


@pytest.mark.parametrize(
    ("state", "effect"),
    [
        (S.SCHEDULED, CancelEffect.CANCEL),
        (S.AWAITING_PARENT, CancelEffect.CANCEL),
        (S.LEASED, CancelEffect.REQUEST),
        *[(state, CancelEffect.REFUSE) for state in sorted(TERMINAL_STATES)],
    ],
)
def test_a_cancel_cancels_a_pending_job_asks_a_running_one_and_refuses_a_finished_one(state, effect):
    assert cancel_effect(state) is effect


def test_a_cancel_records_who_asked():
    assert cancel_cause("admin:alice") == "cancelled by admin:alice"


@pytest.mark.parametrize("state", list(State))
def test_only_a_dead_lettered_or_quarantined_job_may_be_requeued(state):
    assert can_requeue(state) is (state in {S.DEAD_LETTERED, S.QUARANTINED})
    assert {S.DEAD_LETTERED, S.QUARANTINED} == REQUEUES


def test_a_claim_is_legal_only_from_scheduled():
    transitions.claim(S.SCHEDULED)
    for state in set(State) - {S.SCHEDULED}:
        with pytest.raises(IllegalTransition):
            transitions.claim(state)


# -- an illegal move fails loudly, never writes -----------------------------------------------------------


def test_check_names_the_illegal_move():
    check(S.LEASED, S.SUCCEEDED)
    with pytest.raises(IllegalTransition, match="a job cannot move from succeeded to scheduled"):
        check(S.SUCCEEDED, S.SCHEDULED)


def test_a_doctored_lease_ending_row_is_refused_when_it_is_read(monkeypatch):
    monkeypatch.setitem(LEASE_ENDINGS, (K.SUCCEEDED, True, False), Rule(S.AWAITING_PARENT, ""))
    with pytest.raises(IllegalTransition, match="from leased to awaiting_parent"):
        move(K.SUCCEEDED)


def test_a_doctored_cancel_row_is_refused_when_it_is_read(monkeypatch):
    monkeypatch.setitem(CANCELS, S.SUCCEEDED, CancelEffect.CANCEL)
    with pytest.raises(IllegalTransition, match="from succeeded to cancelled"):
        cancel_effect(S.SUCCEEDED)


def test_a_doctored_requeue_table_is_refused_when_it_is_read(monkeypatch):
    monkeypatch.setattr(transitions, "REQUEUES", REQUEUES | {S.SUCCEEDED})
    with pytest.raises(IllegalTransition, match="from succeeded to scheduled"):
        can_requeue(S.SUCCEEDED)


def test_a_purge_may_name_only_final_states():
    check_purge([S.SUCCEEDED, S.CANCELLED, S.DEAD_LETTERED, S.QUARANTINED])
    for live in (S.SCHEDULED, S.AWAITING_PARENT, S.LEASED):
        with pytest.raises(IllegalTransition, match="only delete finished jobs"):
            check_purge([S.SUCCEEDED, live])
