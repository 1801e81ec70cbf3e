"""Signals around each Attempt, and one for every state change of every job.

``attempt_started`` is sent in the worker thread just before the handler runs, ``attempt_finished`` just after
it ends (returned, raised or cancelled), before the Attempt's database connections are closed. Both send
``sender`` (the handler's JobRegistration) and ``context`` (the JobContext).

``job_transitioned`` is sent once for each state change a job makes, after the transaction that made it
commits (never for one rolled back): born (enqueued, or minted by a schedule), claimed, its Attempt ended
(reported, or its lease expired), cancelled, requeued. ``sender`` is the store's class; the keyword arguments
are ``transition`` (a :class:`~backwave_django.store.announced.Transition`) and its fields, ``job_id``,
``wire_name``, ``queue``, ``from_state`` (None for a birth), ``to_state``, ``attempt``, ``cause`` and
``operation``. It is sent in the thread that committed: a Pump's own thread for claims, outcomes and
sweeps, so a receiver should be quick (hand slow work to a job of its own). A receiver that raises is logged
(logger ``backwave.signals``) and the others still get the signal; nothing it does can undo the change or stop
the Pump. With no receiver connected the stores build nothing at all.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.dispatch import Signal

if TYPE_CHECKING:
    from .store.announced import Transition

logger = logging.getLogger("backwave.signals")

attempt_started = Signal()
attempt_finished = Signal()
job_transitioned = Signal()


def listening() -> bool:
    """Whether any receiver is connected to ``job_transitioned`` (for any sender): the stores ask before they
    build anything, so a project without one pays one attribute read per operation."""
    return bool(job_transitioned.receivers)


class Announcer:
    """What a store without transactions (the memory store's ``announce``) calls: :func:`announce` from
    ``sender``, asked first whether anyone listens."""

    def __init__(self, sender: Any) -> None:
        self.sender = sender

    def listening(self) -> bool:
        return listening()

    def __call__(self, transitions: Sequence[Transition], /) -> None:
        announce(transitions, self.sender)


def announce(transitions: Sequence[Transition], sender: Any = None) -> None:
    """Send ``job_transitioned`` for each of ``transitions``, in order; a receiver that raises is logged and
    never stops the others, nor this function."""
    for transition in transitions:
        try:
            replies = job_transitioned.send_robust(
                sender,
                transition=transition,
                job_id=transition.job_id,
                wire_name=transition.wire_name,
                queue=transition.queue,
                from_state=transition.from_state,
                to_state=transition.to_state,
                attempt=transition.attempt,
                cause=transition.cause,
                operation=transition.operation,
            )
        except Exception:  # send_robust itself should not raise; if it does, the change still stands
            logger.exception("job_transitioned could not be sent for job %s", transition.job_id)
            continue
        for receiver, reply in replies:
            if isinstance(reply, Exception):
                logger.error(
                    "a job_transitioned receiver (%r) raised on job %s (%s -> %s); the change stands",
                    receiver, transition.job_id, transition.from_state, transition.to_state,
                    exc_info=(type(reply), reply, reply.__traceback__),
                )  # fmt: skip
