"""How healthy a Pump and a worker group are: the states, and how a group's is read from its Pumps'."""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Health(enum.StrEnum):
    """A Pump's health, as it records it in ``PumpStatus`` and reports it to ``backwave_health``."""

    RUNNING = "running"
    DEGRADED = "degraded"  # a transient store fault, retried with backoff; or abandoned handler threads
    HALTED = "halted"  # a fault it cannot classify as transient: this Pump stopped, its leases lapse
    STOPPED = "stopped"  # shut down cleanly


class GroupHealth(enum.StrEnum):
    RUNNING = "running"
    DEGRADED = "degraded"
    PARTIALLY_HALTED = "partially halted"
    HALTED = "halted"
    STOPPED = "stopped"


def group_health(pumps: Iterable[Health]) -> GroupHealth:
    """A group is halted only when every Pump is; one halted Pump among running ones is a partial halt."""
    states = list(pumps)
    if states and all(h is Health.STOPPED for h in states):
        return GroupHealth.STOPPED
    halted = sum(h is Health.HALTED for h in states)
    if states and halted == len(states):
        return GroupHealth.HALTED
    if halted:
        return GroupHealth.PARTIALLY_HALTED
    return GroupHealth.DEGRADED if Health.DEGRADED in states else GroupHealth.RUNNING
