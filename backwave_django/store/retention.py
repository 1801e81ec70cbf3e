"""Retention in the Django stores (mixed into ``DjangoStore``): purging finished jobs with their outcomes,
leases and audit records, oldest first, in bounded batches.

A purge never removes a row something still needs, and never lets a row the database refuses to delete hold
the others back:

- Rows of the project's models that point at a job with a foreign key that keeps its job (``PROTECT``,
  ``RESTRICT``, ``DO_NOTHING``) keep that job: the purge's query leaves it out.
- A delete the database refuses anyway (a foreign key or a trigger Django does not know about, a reference
  created while the batch was picked) fails only its own piece: the batch is split in halves, each deleted in
  a savepoint of its own, down to single rows, so everything deletable is deleted. The refused ids are logged
  and remembered by the store (a Pump keeps one store for its life), and its later purges pass over them,
  so they never block the rows behind them. A store forgets them when its worker restarts, and so tries each
  again once per worker lifetime. Remembering them in memory rather than marking the rows needs no write to
  a row that something outside backwave is holding on to, and no schema change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections, models, transaction
from django.db.models import Min, QuerySet

from ..core.records import AuditAction
from ..core.retention import PurgeRule
from ..core.states import LIVE_STATES, TERMINAL_STATES, State
from ..core.text import describe
from ..models import AuditRecord, Dependency, Job, JobTag, Lease, Outcome
from . import changes

logger = logging.getLogger("backwave.store")

#: A foreign key to Job with one of these says the row needs its job: a purge leaves that job alone.
_KEEPS_ITS_JOB = (models.PROTECT, models.RESTRICT, models.DO_NOTHING)
#: The refused rows a store remembers; past this many, the longest-remembered are forgotten (and tried again).
MAX_REMEMBERED_REFUSALS = 10_000


def _protected_job_ids(using: str) -> list[QuerySet[Any, Any]]:
    """The ids of jobs that rows of other models point to with a foreign key that keeps its job (a model of
    the project that records which job made it, say): each a subquery the purge excludes. A foreign key
    with CASCADE or SET_NULL lets the job go, as Django's own delete would."""
    found = []
    for relation in Job._meta.get_fields(include_hidden=True):
        if not (relation.auto_created and relation.is_relation and not relation.concrete):
            continue
        if getattr(relation, "on_delete", None) not in _KEEPS_ITS_JOB:
            continue
        field = relation.field  # type: ignore[union-attr]
        rows = relation.related_model._base_manager.using(using)  # type: ignore[union-attr]
        found.append(rows.filter(**{f"{field.name}__isnull": False}).values(field.attname))
    return found


def _cascading_relations() -> list[Any]:
    """Relations to Job from models other than backwave's own whose delete does something (CASCADE, SET_NULL,
    ...). A relation that keeps its job needs nothing: the purge never picks the jobs it points to."""
    return [
        relation
        for relation in Job._meta.get_fields(include_hidden=True)
        if relation.auto_created
        and relation.is_relation
        and not relation.concrete
        and relation.related_model not in (Outcome, Lease, JobTag, Dependency)
        and getattr(relation, "on_delete", None) not in _KEEPS_ITS_JOB
    ]


class RetentionMixin:
    """The retention operations of the Storage Contract, through the ORM."""

    using: str
    #: The ids of finished jobs the database refused to delete, oldest refusal first, with (queue, state).
    _refused: dict[int, tuple[str, str]]

    if TYPE_CHECKING:  # provided by DjangoStore

        def _write(self) -> AbstractContextManager[None]: ...

        def _among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]: ...

        def _check_constraints_at_once(self) -> None: ...

        def is_transient_fault(self, exc: BaseException) -> bool: ...

    def purge(self, rules: Sequence[PurgeRule], *, max_jobs: int, dry_run: bool = False) -> int:
        purged = 0
        for rule in rules:
            if purged >= max_jobs:
                break
            changes.check_purge(rule.states)  # a rule that named a live state would be a bug: never delete
            purged += self._purge_rule(rule, max_jobs - purged, dry_run)
        return purged

    def _purge_rule(self, rule: PurgeRule, limit: int, dry_run: bool) -> int:
        finished = Job.objects.using(self.using).filter(terminal_at__lt=rule.before)
        # A parent stays while a child that has not finished depends on it (for its output, and its edge).
        waited_on = Dependency.objects.using(self.using).filter(child__state__in=LIVE_STATES)
        finished = finished.exclude(has_children=True, id__in=waited_on.values("parent_id"))
        for needed in _protected_job_ids(self.using):
            finished = finished.exclude(id__in=needed)
        if dry_run:
            return int(
                finished.filter(queue__in=list(rule.queues), state__in=list(rule.states))[:limit].count()
            )
        purged = 0
        while purged < limit:  # a batch with refused rows is topped up from the rows behind them
            own = not connections[self.using].in_atomic_block
            with self._write():
                ids = self._oldest(finished, rule, limit - purged)
                if not ids:
                    break
                if own:
                    self._check_constraints_at_once()
                deleted, refused = self._delete_deletable(ids)
            purged += deleted
            self._remember(refused)
            if not refused or not deleted:  # nothing left behind, or nothing deletable: the next call goes on
                break
        return purged

    def _oldest(self, finished: QuerySet[Job], rule: PurgeRule, limit: int) -> list[int]:
        """Up to ``limit`` ids to purge, oldest first, passing over the rows refused before."""
        ids: list[int] = []
        refused = self._refused
        # Queue by queue and state by state, each oldest first along backwave_job_queue_state: a batch reads
        # what it deletes (and the refused rows ahead of it), never the whole history.
        for queue in rule.queues:
            for state in rule.states:
                if len(ids) >= limit:
                    return ids
                ahead = sum(1 for where in refused.values() if where == (queue, state))
                oldest = finished.filter(queue=queue, state=state).order_by("terminal_at")
                found = oldest.select_for_update(skip_locked=True).values_list("id", flat=True)
                ids += [i for i in found[: limit - len(ids) + ahead] if i not in refused][: limit - len(ids)]
        return ids

    def _delete_deletable(self, ids: list[int]) -> tuple[int, list[tuple[int, BaseException]]]:
        """Delete what the database lets us of these finished jobs, each piece in a savepoint: a refused piece
        is split in halves, down to single rows. Returns how many were deleted, and the refused rows."""
        try:
            with transaction.atomic(using=self.using):
                return self._delete_finished(ids), []
        except DatabaseError as exc:
            if self.is_transient_fault(exc):
                raise
            if len(ids) == 1:
                return 0, [(ids[0], exc)]
        half = len(ids) // 2
        first, first_refused = self._delete_deletable(ids[:half])
        second, second_refused = self._delete_deletable(ids[half:])
        return first + second, first_refused + second_refused

    def _remember(self, refused: list[tuple[int, BaseException]]) -> None:
        if not refused:
            return
        ids = [job_id for job_id, _ in refused]
        logger.warning(
            "could not purge finished job(s) %s: the database refused to delete them (%s). This worker's "
            "purges pass over them until it restarts; to keep them on purpose, declare what refers to them "
            "as a model with a foreign key with on_delete=PROTECT",
            ids, describe(refused[0][1]),
        )  # fmt: skip
        remembered = self._refused
        rows = Job.objects.using(self.using).filter(id__in=ids).values_list("id", "queue", "state")
        where = {job_id: (queue, state) for job_id, queue, state in rows}
        for job_id in ids:
            remembered[job_id] = where.get(job_id, ("", ""))
        while len(remembered) > MAX_REMEMBERED_REFUSALS:
            del remembered[next(iter(remembered))]

    def _delete_finished(self, ids: list[int]) -> int:
        """Delete these finished jobs with their outcomes, leases and audit records: plain DELETEs by id (an
        ORM delete spends most of a batch building lookups), or Django's delete when a model of the project
        points at jobs with CASCADE or SET_NULL, so that what it declared happens."""
        audit = [str(AuditAction.CANCEL), str(AuditAction.REQUEUE)]
        finished = [str(state) for state in TERMINAL_STATES]
        if _cascading_relations():
            edges = Dependency.objects.using(self.using)
            edges.filter(parent_id__in=ids).delete()
            edges.filter(child_id__in=ids).delete()
            Outcome.objects.using(self.using).filter(job_id__in=ids).delete()
            targets = [str(i) for i in ids]
            AuditRecord.objects.using(self.using).filter(target__in=targets, action__in=audit).delete()
            deleted = Job.objects.using(self.using).filter(id__in=ids, state__in=finished).delete()
            return int(deleted[1].get(Job._meta.label, 0))
        with connections[self.using].cursor() as cursor:
            for model in (Outcome, Lease, JobTag):
                cursor.execute(*self._delete_where(model, ("job_id", ids)))
            for column in ("parent_id", "child_id"):  # the edges go with either end
                cursor.execute(*self._delete_where(Dependency, (column, ids)))
            cursor.execute(
                *self._delete_where(AuditRecord, ("target", [str(i) for i in ids]), ("action", audit))
            )
            cursor.execute(*self._delete_where(Job, ("id", ids), ("state", finished)))
            return int(cursor.rowcount)

    def _delete_where(
        self, model: type[models.Model], *conditions: tuple[str, Sequence[Any]]
    ) -> tuple[str, list[Any]]:
        """``DELETE FROM table WHERE column IN (values) AND ...``, each condition as the database's hook
        writes it (:meth:`DjangoStore._among`)."""
        clauses, params = [], []
        for column, values in conditions:
            clause, values_params = self._among(column, values)
            clauses.append(clause)
            params += values_params
        table = connections[self.using].ops.quote_name(model._meta.db_table)
        return f"DELETE FROM {table} WHERE {' AND '.join(clauses)}", params

    def oldest_finished(self, queues: Sequence[str] | None = None) -> dict[State, datetime]:
        found: dict[State, datetime] = {}
        for state in (State.SUCCEEDED, State.CANCELLED, State.DEAD_LETTERED, State.QUARANTINED):
            rows = Job.objects.using(self.using).filter(state=state, terminal_at__isnull=False)
            if queues is not None:
                rows = rows.filter(queue__in=list(queues))
            oldest = rows.aggregate(t=Min("terminal_at"))["t"]
            if oldest is not None:
                found[state] = oldest
        return found
