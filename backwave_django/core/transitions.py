"""Where a job goes next: the one table every store consumes.

Three tables, each a plain dict, cover every move a store makes:

- :data:`LEASE_ENDINGS`: how a leased job's Attempt ended (a report, an expired lease, a release at
  shutdown), whether attempts are left, and whether an operator asked to cancel it, give its next state,
  the change to its attempt counter and the cause recorded.
- :data:`CANCELS`: what an operator's cancel does in each state.
- :data:`REQUEUES`: which states an operator may requeue from.

:func:`after_attempt` reads the first table, and is the only place that asks the retry policy whether a
failed or expired Attempt runs again. Every move is checked against ``states.TRANSITIONS`` when it is
decided (:func:`check`), so a table that named an illegal move fails loudly, never writes silently.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from .records import OutcomeKind
from .retry import RetryPolicy
from .states import State, is_legal
from .values import value

OPERATOR_CANCEL = "operator-cancel"


class IllegalTransition(RuntimeError):
    """A move that ``states.TRANSITIONS`` does not allow: a bug in a store or a table, never written."""


def check(before: State, after: State) -> None:
    """Raise :class:`IllegalTransition` unless a job may move from ``before`` to ``after``."""
    if not is_legal(before, after):
        raise IllegalTransition(f"a job cannot move from {before} to {after}")


def check_purge(states: Iterable[State]) -> None:
    """Raise :class:`IllegalTransition` unless every state is final: only a finished job may be deleted."""
    for state in states:
        if not state.is_terminal:
            raise IllegalTransition(f"a purge may only delete finished jobs, not {state}")


class Due(enum.Enum):
    """What becomes of ``due_at`` when a lease ends in ``scheduled``."""

    KEEP = "keep"  # terminal: the due time no longer matters
    RETRY = "retry"  # the retry policy's time
    NOW = "now"  # at once (a release)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of a table: the state reached, the cause recorded, the attempt change and the due time."""

    state: State
    cause: str  # a template: {message} is the report's message, {attempt} the Attempt that ended
    attempt_delta: int = 0
    due: Due = Due.KEEP


_K = OutcomeKind
_CANCELLED = Rule(State.CANCELLED, OPERATOR_CANCEL)

#: (how the Attempt ended, attempts left?, cancel requested?) -> Rule. "Attempts left" only matters for a
#: failure or an expiry; for the other endings both values give the same rule.
LEASE_ENDINGS: dict[tuple[OutcomeKind, bool, bool], Rule] = {
    # The handler returned: it succeeded, even if a cancel was asked for meanwhile.
    (_K.SUCCEEDED, True, False): Rule(State.SUCCEEDED, ""),
    (_K.SUCCEEDED, False, False): Rule(State.SUCCEEDED, ""),
    (_K.SUCCEEDED, True, True): Rule(State.SUCCEEDED, ""),
    (_K.SUCCEEDED, False, True): Rule(State.SUCCEEDED, ""),
    # The handler raised: retry, or dead-letter at the ceiling; a cancelled job is never retried.
    (_K.FAILED, True, False): Rule(State.SCHEDULED, "{message}", due=Due.RETRY),
    (_K.FAILED, False, False): Rule(State.DEAD_LETTERED, "{message}"),
    (_K.FAILED, True, True): _CANCELLED,
    (_K.FAILED, False, True): _CANCELLED,
    # The handler stopped because an operator asked it to.
    (_K.CANCELLED, True, False): _CANCELLED,
    (_K.CANCELLED, False, False): _CANCELLED,
    (_K.CANCELLED, True, True): _CANCELLED,
    (_K.CANCELLED, False, True): _CANCELLED,
    # No handler for the wire name, or arguments that no longer fit it: set aside, never retried.
    (_K.UNROUTABLE, True, False): Rule(State.QUARANTINED, "{message}"),
    (_K.UNROUTABLE, False, False): Rule(State.QUARANTINED, "{message}"),
    (_K.UNROUTABLE, True, True): Rule(State.QUARANTINED, "{message}"),
    (_K.UNROUTABLE, False, True): Rule(State.QUARANTINED, "{message}"),
    # The lease lapsed before an outcome was written (a crash, a lost connection): the Attempt counts.
    (_K.EXPIRED, True, False): Rule(State.SCHEDULED, "lease expired on attempt {attempt}", due=Due.RETRY),
    (_K.EXPIRED, False, False): Rule(
        State.DEAD_LETTERED, "lease expired on attempt {attempt} (ceiling reached)"
    ),
    (_K.EXPIRED, True, True): Rule(State.CANCELLED, f"{OPERATOR_CANCEL} (its lease expired)"),
    (_K.EXPIRED, False, True): Rule(State.CANCELLED, f"{OPERATOR_CANCEL} (its lease expired)"),
    # Given back at shutdown by a handler that stopped: the Attempt does not count, even when the job is
    # cancelled instead of run again.
    (_K.RELEASED, True, False): Rule(State.SCHEDULED, "released at shutdown", attempt_delta=-1, due=Due.NOW),
    (_K.RELEASED, False, False): Rule(State.SCHEDULED, "released at shutdown", attempt_delta=-1, due=Due.NOW),
    (_K.RELEASED, True, True): Rule(State.CANCELLED, OPERATOR_CANCEL, attempt_delta=-1),
    (_K.RELEASED, False, True): Rule(State.CANCELLED, OPERATOR_CANCEL, attempt_delta=-1),
}


@value
class Move:
    """Where a leased job goes when its Attempt ends: all a store needs to write the change."""

    state: State
    attempt_delta: int
    due_at: datetime | None  # the new due time when the job is scheduled again, else None
    cause: str  # the Outcome's message; for a terminal state also the job's terminal cause

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal


def after_attempt(
    kind: OutcomeKind,
    *,
    job_id: int,
    attempt: int,
    max_attempts: int,
    cancel_requested: bool,
    message: str,
    retry: RetryPolicy,
    now: datetime,
) -> Move:
    """The move for a leased job whose Attempt number ``attempt`` ended in ``kind`` at ``now``."""
    rule = LEASE_ENDINGS[kind, attempt < max_attempts, cancel_requested]
    check(State.LEASED, rule.state)
    if rule.due is Due.RETRY:  # the backoff is worked out only for a job that will run again
        due_at = retry.next_attempt_at(attempt, max_attempts, now, key=job_id)
    else:
        due_at = now if rule.due is Due.NOW else None
    cause = rule.cause.format(message=message, attempt=attempt)
    return Move(state=rule.state, attempt_delta=rule.attempt_delta, due_at=due_at, cause=cause)


class CancelEffect(enum.Enum):
    CANCEL = "cancel"  # pending: cancelled at once
    REQUEST = "request"  # running: the flag is set and the handler asked to stop at its next heartbeat
    REFUSE = "refuse"  # terminal: nothing changes


#: What an operator's cancel does in each state.
CANCELS: dict[State, CancelEffect] = {
    State.SCHEDULED: CancelEffect.CANCEL,
    State.AWAITING_PARENT: CancelEffect.CANCEL,
    State.LEASED: CancelEffect.REQUEST,
    State.SUCCEEDED: CancelEffect.REFUSE,
    State.CANCELLED: CancelEffect.REFUSE,
    State.DEAD_LETTERED: CancelEffect.REFUSE,
    State.QUARANTINED: CancelEffect.REFUSE,
}

#: The states an operator may requeue from (attempt reset to 0, due now).
REQUEUES: frozenset[State] = frozenset({State.DEAD_LETTERED, State.QUARANTINED})


def cancel_effect(state: State) -> CancelEffect:
    effect = CANCELS[state]
    if effect is CancelEffect.CANCEL:
        check(state, State.CANCELLED)
    return effect


def cancel_cause(actor: str) -> str:
    return f"cancelled by {actor}"


def can_requeue(state: State) -> bool:
    if state in REQUEUES:
        check(state, State.SCHEDULED)
        return True
    return False


#: The one state a claim leases from: every store's claim selects jobs in it (and only in it).
CLAIMABLE = State.SCHEDULED


def claim(state: State) -> None:
    """A claim moves a job in ``state`` (which is :data:`CLAIMABLE`) to leased and adds one to its attempt."""
    check(state, State.LEASED)
