"""How healthy a Pump and a worker group are: the states, and how a group's is read from its Pumps'."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import datetime, timedelta


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


class Observed(enum.StrEnum):
    """A Pump as an observer sees it from its last recorded status: its own word, or silent."""

    RUNNING = "running"
    DEGRADED = "degraded"
    HALTED = "halted"
    STOPPED = "stopped"
    SILENT = "silent"  # it said running or degraded, but has not beaten for too long: presumed dead

    @property
    def serving(self) -> bool:
        return self in (Observed.RUNNING, Observed.DEGRADED)


def silent_after(heartbeat_interval: timedelta) -> timedelta:
    """How long a Pump may go without recording its status before it counts as silent: three missed beats,
    and never less than 15 s (a busy host may be slow to beat)."""
    return max(heartbeat_interval * 3, timedelta(seconds=15))


def observe(health: Health, last_beat_at: datetime, now: datetime, heartbeat_interval: timedelta) -> Observed:
    if health in (Health.HALTED, Health.STOPPED):
        return Observed(health.value)
    if now - last_beat_at > silent_after(heartbeat_interval):
        return Observed.SILENT
    return Observed(health.value)
