"""Job states and the table of legal transitions between them."""

from __future__ import annotations

import enum


class State(enum.StrEnum):
    """Where a job is in its life. The string values are what the database stores."""

    SCHEDULED = "scheduled"
    AWAITING_PARENT = "awaiting_parent"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    DEAD_LETTERED = "dead_lettered"
    QUARANTINED = "quarantined"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({State.SUCCEEDED, State.CANCELLED, State.DEAD_LETTERED, State.QUARANTINED})
#: The states of an unfinished job, in a fixed order (index conditions are written from it).
LIVE_STATES = (State.SCHEDULED, State.AWAITING_PARENT, State.LEASED)

#: States a job may be born in: scheduled, or with parents (``core.dependencies``) awaiting_parent, or
#: cancelled when a parent it needs to succeed has failed already.
INITIAL_STATES = frozenset({State.SCHEDULED, State.AWAITING_PARENT, State.CANCELLED})

#: Every legal move, with who makes it. Anything not listed here is a bug in the store.
TRANSITIONS: dict[tuple[State, State], str] = {
    (State.AWAITING_PARENT, State.SCHEDULED): "the last parent finished",
    (State.AWAITING_PARENT, State.CANCELLED): "a parent failed, or an operator cancelled",
    (State.SCHEDULED, State.LEASED): "a claim (starts an Attempt)",
    (State.SCHEDULED, State.CANCELLED): "an operator cancelled a pending job",
    (State.LEASED, State.SUCCEEDED): "the handler returned",
    (
        State.LEASED,
        State.SCHEDULED,
    ): "a failure or expired lease with attempts left, or a release at shutdown",
    (State.LEASED, State.DEAD_LETTERED): "a failure or expired lease at the attempt ceiling",
    (
        State.LEASED,
        State.CANCELLED,
    ): "a cancel was requested: the handler stopped, failed, or its lease ended",
    (State.LEASED, State.QUARANTINED): "no handler for the wire name, or a payload that no longer decodes",
    (State.DEAD_LETTERED, State.SCHEDULED): "an operator requeue (attempt reset to 0)",
    (State.QUARANTINED, State.SCHEDULED): "an operator requeue (attempt reset to 0)",
}


def is_legal(before: State, after: State) -> bool:
    """True when a job may move from ``before`` to ``after``."""
    return (before, after) in TRANSITIONS
