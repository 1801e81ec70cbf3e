"""What every store tells the ``job_transitioned`` signal: one :class:`Transition` per state change a job
makes (born, claimed, its Attempt ended, cancelled, requeued), built here from what the store wrote, so every
store says the same thing for the same change.

A store builds its transitions only when someone listens (``signals.listening()``, or the memory store's
``announce`` callback), and hands them over once what it wrote is committed: the Django stores through
``transaction.on_commit``, the memory store once it lets go of its lock. A purge deletes jobs, it moves none:
it announces nothing. Pure Python: no Django, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from ..core.records import ClaimedJob, OutcomeKind
from ..core.states import State
from ..core.values import value
from .changes import Change
from .contract import EnqueuedJob, NewJob


class Announce(Protocol):
    """How a store without transactions (the memory store) hands its committed transitions over."""

    def listening(self) -> bool:
        """Whether anyone listens: when not, the store builds nothing."""
        ...

    def __call__(self, transitions: Sequence[Transition], /) -> None: ...


@value
class Transition:
    """One job's state change, as committed.

    ``from_state`` is None when the job was born (enqueued, or minted by a schedule). ``attempt`` is the
    Attempt the change concerns: the one a claim began or whose end moved the job; for other changes, the
    job's attempt count after it. ``cause`` says why, in the words the store recorded: an Attempt's outcome
    message (an error's first line, "lease expired on attempt 2"), the cancel's cause, the requeue's actor;
    empty for a birth (for a child born cancelled: the cause naming its parent). ``operation`` is the store
    operation that made it: enqueue, mint, trigger, claim, report, expire, cancel, requeue, or resolve (a
    parent's end released or cancelled a waiting child).
    """

    job_id: int
    wire_name: str
    queue: str
    from_state: State | None
    to_state: State
    attempt: int
    cause: str
    operation: str


def births(
    jobs: Sequence[NewJob], done: Sequence[EnqueuedJob], operation: str = "enqueue"
) -> list[Transition]:
    """The jobs an enqueue wrote (a duplicate by unique key was not written: it has none)."""
    return [
        Transition(
            job_id=result.id,
            wire_name=new.wire_name,
            queue=new.queue,
            from_state=None,
            to_state=result.state,
            attempt=0,
            cause=result.terminal_cause,
            operation=operation,
        )
        for new, result in zip(jobs, done, strict=True)
        if not result.duplicate
    ]


def claims(claimed: Iterable[ClaimedJob], worker_id: str) -> list[Transition]:
    cause = f"claimed by {worker_id}"
    return [
        Transition(
            job_id=job.id,
            wire_name=job.wire_name,
            queue=job.queue,
            from_state=State.SCHEDULED,
            to_state=State.LEASED,
            attempt=job.attempt,
            cause=cause,
            operation="claim",
        )
        for job in claimed
    ]


def endings(moves: Iterable[Change], names: Mapping[int, tuple[str, str]]) -> list[Transition]:
    """Leased jobs whose Attempt ended (``names``: each job's wire name and queue)."""
    return [
        Transition(
            job_id=change.job_id,
            wire_name=names[change.job_id][0],
            queue=names[change.job_id][1],
            from_state=State.LEASED,
            to_state=change.state,
            attempt=change.attempt,
            cause=change.message,
            operation="expire" if change.kind is OutcomeKind.EXPIRED else "report",
        )
        for change in moves
    ]


def requeue_cause(actor: str) -> str:
    return f"requeued by {actor}"
