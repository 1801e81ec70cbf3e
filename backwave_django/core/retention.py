"""Retention: how long finished jobs are kept, and the purges that follow from it at a given moment."""

from __future__ import annotations

from datetime import datetime, timedelta

from .states import State
from .values import value

#: A purge deletes at most this many jobs per statement; a full batch is followed at once by another.
MAX_PURGE_BATCH = 500
SUCCEEDED_CLASS = (State.SUCCEEDED, State.CANCELLED)
FAILED_CLASS = (State.DEAD_LETTERED, State.QUARANTINED)


@value
class RetentionRule:
    """Finished jobs of ``queues`` are kept ``succeeded`` (succeeded and cancelled jobs) or ``failed``
    (dead-lettered and quarantined jobs) after they finished; None keeps them for ever."""

    queues: tuple[str, ...]
    succeeded: timedelta | None
    failed: timedelta | None


@value
class PurgeRule:
    """Delete the jobs of ``queues`` in ``states`` that finished before ``before``."""

    queues: tuple[str, ...]
    states: tuple[State, ...]
    before: datetime


def purges(rules: tuple[RetentionRule, ...], now: datetime) -> tuple[PurgeRule, ...]:
    """The purges that retention asks for at ``now``."""
    found = []
    for rule in rules:
        for keep, states in ((rule.succeeded, SUCCEEDED_CLASS), (rule.failed, FAILED_CLASS)):
            if keep is not None and rule.queues:
                found.append(PurgeRule(queues=rule.queues, states=states, before=now - keep))
    return tuple(found)
