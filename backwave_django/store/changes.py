"""What a store writes when a leased job's Attempt ends: the job's move and its Outcome row.

A :class:`Change` pairs the decision of ``core.transitions`` with what is written beside it (who ended
the Attempt, its traceback), already cleaned and bounded. Every store builds its changes here, so they all
write the same thing for the same event. Every other decision a store asks of ``core.transitions`` (may a
claim lease this job, what does a cancel do, may this job be requeued, may a purge delete jobs in these
states) goes through here too, so that a move the legal transitions forbid is refused as the contract says:
with :class:`StoreError`, before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core import dependencies, transitions
from ..core.records import ClaimedJob, OutcomeKind, OutcomeReport
from ..core.retry import RetryPolicy
from ..core.states import State
from ..core.tags import MAX_TAGS_PER_JOB, stored_tag_problem
from ..core.text import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES, clean
from ..core.values import value
from .contract import OutcomeDetail, StoreError

#: The columns a claim returns, in the order of :class:`ClaimedJob`'s fields.
CLAIMED_FIELDS = (
    "id", "wire_name", "queue", "payload", "attempt", "max_attempts", "due_at", "timeout", "scheduled_for",
    "created_at",
    "trace_context",
)  # fmt: skip


def _refused(exc: transitions.IllegalTransition) -> StoreError:
    """A move a table names but ``states.TRANSITIONS`` forbids (a bug in a table) refuses the operation. (A
    plain ``try`` in each function below: a context manager would cost more than the checks, per job.)"""
    return StoreError(f"refused: {exc}")


def check_claim(state: State) -> None:
    """Raise :class:`StoreError` unless a claim may lease a job in ``state``: a store that reads each job's
    state before it leases it (the memory store) checks the state it read."""
    try:
        transitions.claim(state)
    except transitions.IllegalTransition as exc:
        raise _refused(exc) from exc


def claimable_state() -> State:
    """The state a database store's claim selects (its ``WHERE state = ...``), after checking against the
    legal transitions, at run time, that a claim may lease a job in it. That WHERE clause is the guard on each
    row: a claim never touches a job in another state, so it need not read and check every job's state (the
    memory store, which reads them anyway, checks each with :func:`check_claim`)."""
    check_claim(transitions.CLAIMABLE)
    return transitions.CLAIMABLE


def check_purge(states: Iterable[State]) -> None:
    """Raise :class:`StoreError` unless every state is final: a purge deletes finished jobs only."""
    try:
        transitions.check_purge(states)
    except transitions.IllegalTransition as exc:
        raise _refused(exc) from exc


def cancel_effect(state: State) -> transitions.CancelEffect:
    try:
        return transitions.cancel_effect(state)
    except transitions.IllegalTransition as exc:
        raise _refused(exc) from exc


def can_requeue(state: State) -> bool:
    try:
        return transitions.can_requeue(state)
    except transitions.IllegalTransition as exc:
        raise _refused(exc) from exc


def child_start(parents: Mapping[int, State], run_on: dependencies.RunOn) -> dependencies.Start:
    """How a job with these parents (their states now) is born: every store writes this."""
    return dependencies.start(parents, run_on)


def resolve_edges(
    edges: Iterable[dependencies.Edge], children: Mapping[int, dependencies.Waiting]
) -> dependencies.Resolved:
    """What resolving these edges does to their children (read under lock): the one place every store asks,
    in the parent's terminal transaction. A move the legal transitions forbid raises :class:`StoreError`."""
    try:
        return dependencies.resolve(edges, children)
    except dependencies.IllegalDependencyMove as exc:
        raise StoreError(f"refused: {exc}") from exc


def _after_attempt(kind: OutcomeKind, **facts: Any) -> transitions.Move:
    try:
        return transitions.after_attempt(kind, **facts)
    except transitions.IllegalTransition as exc:
        raise _refused(exc) from exc


def claimed_job(row: Sequence[Any]) -> ClaimedJob:
    """A claimed row (``CLAIMED_FIELDS`` in order) as the value a claim returns."""
    return ClaimedJob(**dict(zip(CLAIMED_FIELDS, row, strict=True)))


@value
class Change:
    """One leased job's move, and the Outcome that records it."""

    job_id: int
    attempt: int
    kind: OutcomeKind
    worker: str
    move: transitions.Move
    detail: str = ""  # a failure's traceback
    error_type: str = ""  # a failure's exception class
    output: str | None = None  # a success's return value, as JSON text
    started_at: datetime | None = None  # when the Attempt began (its lease's claim)
    tags: tuple[str, ...] = ()  # tags the Attempt added (stored forms), written with the outcome

    @property
    def state(self) -> State:
        return self.move.state

    @property
    def message(self) -> str:
        return clean(self.move.cause, MAX_MESSAGE_BYTES)

    @property
    def update_key(self) -> tuple[object, ...]:
        """Changes with equal keys are written by one UPDATE."""
        return (self.move.state, self.move.due_at, self.message, self.move.attempt_delta)


def storable_detail(detail: str | None) -> str:
    return clean(detail, MAX_DETAIL_BYTES, keep="end") if detail else ""


#: The longest exception class path stored (the column's size).
MAX_ERROR_TYPE_LENGTH = 255


_NO_DETAIL = OutcomeDetail()


def for_report(
    report: OutcomeReport,
    *,
    worker: str,
    cancel_requested: bool,
    retry: RetryPolicy,
    now: datetime,
    detail: OutcomeDetail | None = None,
    started_at: datetime | None = None,
) -> Change:
    move = _after_attempt(
        report.kind,
        job_id=report.job_id,
        attempt=report.attempt,
        max_attempts=report.max_attempts,
        cancel_requested=cancel_requested,
        message=report.message,
        retry=retry,
        now=now,
    )
    detail = detail or _NO_DETAIL
    return Change(
        job_id=report.job_id,
        attempt=report.attempt,
        kind=report.kind,
        worker=worker,
        move=move,
        detail=storable_detail(detail.traceback),
        error_type=clean(detail.error_type, MAX_ERROR_TYPE_LENGTH),
        output=detail.output if move.state is State.SUCCEEDED else None,  # kept only with a success
        started_at=started_at,
        tags=storable_tags(detail.tags),
    )


def storable_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """An Attempt's tags as a store writes them: each once, sorted, only stored forms (``context.add_tag``
    checked them already: anything else is a bug upstream, dropped like text past its bound), at most
    ``MAX_TAGS_PER_JOB``."""
    if not tags:
        return ()
    good = sorted({tag for tag in tags if stored_tag_problem(tag) is None})
    return tuple(good[:MAX_TAGS_PER_JOB])


def for_expiry(
    *,
    job_id: int,
    attempt: int,
    owner: str,
    max_attempts: int,
    cancel_requested: bool,
    retry: RetryPolicy,
    now: datetime,
    started_at: datetime | None = None,
) -> Change:
    move = _after_attempt(
        OutcomeKind.EXPIRED,
        job_id=job_id,
        attempt=attempt,
        max_attempts=max_attempts,
        cancel_requested=cancel_requested,
        message="",
        retry=retry,
        now=now,
    )
    return Change(
        job_id=job_id,
        attempt=attempt,
        kind=OutcomeKind.EXPIRED,
        worker=owner,
        move=move,
        started_at=started_at,
    )


def opens(moves: Iterable[Change], now: datetime) -> bool:
    """Whether any of these moves makes its job claimable at once: a retry without delay, a job given back
    (``ReportResult.opened``, with the ended parents and limited queues a store knows of itself)."""
    return any(c.state is State.SCHEDULED and (c.move.due_at is None or c.move.due_at <= now) for c in moves)


def first_per_attempt(reports: Sequence[OutcomeReport]) -> dict[tuple[int, int], OutcomeReport]:
    """A batch's rows by (job, Attempt): an Attempt listed twice applies once, by its first row. A job holds
    at most one lease, so at most one of its Attempts passes the fence: a stale row for an Attempt it lost
    never fences off the row for the Attempt it holds now."""
    first: dict[tuple[int, int], OutcomeReport] = {}
    for report in reports:
        first.setdefault((report.job_id, report.attempt), report)
    return first


def with_generic_text(report: OutcomeReport, error: BaseException) -> OutcomeReport:
    """The same report with a message any database stores, for a row whose own text was refused."""
    message = f"the outcome's text could not be stored ({type(error).__name__})"
    return OutcomeReport(
        job_id=report.job_id,
        attempt=report.attempt,
        kind=report.kind,
        max_attempts=report.max_attempts,
        message=message,
    )
