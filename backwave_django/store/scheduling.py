"""Schedules and retention in the Django stores (mixed into ``DjangoStore``).

Every tick is minted at most once across a cluster, by two guarantees that do not depend on each other: the
cursor moves by compare-and-set (a node whose read is stale changes nothing), and a job's (schedule, tick) is
unique in the database (``backwave_job_schedule_tick``), so even a second insert of a tick inserts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connections, models
from django.db.models import F, Min, QuerySet

from ..core.records import AuditAction
from ..core.retention import PurgeRule
from ..core.schedules import MAX_RECORDED_SKIPS, MintDecision, Misfire, ScheduleState
from ..core.states import TERMINAL_STATES, State
from ..models import AuditRecord, Job, Lease, Outcome, Schedule
from . import changes
from .contract import ScheduleDefinition, ScheduleView, SyncResult, TriggerResult

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

LIVE = [State.SCHEDULED, State.AWAITING_PARENT, State.LEASED]
_DEFINED = (
    "wire_name", "queue", "payload", "cron", "every", "timezone", "misfire", "no_overlap", "max_attempts",
    "timeout",
)  # fmt: skip


def _definition_values(definition: ScheduleDefinition) -> dict[str, Any]:
    return {field: getattr(definition, field) for field in _DEFINED}


def schedule_view(row: Schedule) -> ScheduleView:
    """A stored row as the contract's plain value."""
    definition = ScheduleDefinition(
        name=row.name, **{field: getattr(row, field) for field in _DEFINED if field != "misfire"},
        misfire=Misfire(row.misfire),
    )  # fmt: skip
    return ScheduleView(
        definition=definition,
        cursor=row.cursor,
        paused=row.paused,
        removed_at=row.removed_at,
        skipped_count=row.skipped_count,
        recent_skips=tuple(datetime.fromisoformat(t) for t in json.loads(row.recent_skips)),
        last_run_at=row.last_run_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


#: Workers that start together race to insert a new schedule; the losers read it back and compare.
_SYNC_ATTEMPTS = 3

#: A foreign key to Job with one of these says the row needs its job: a purge leaves that job alone.
_KEEPS_ITS_JOB = (models.PROTECT, models.RESTRICT, models.DO_NOTHING)


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
        and relation.related_model not in (Outcome, Lease)
        and getattr(relation, "on_delete", None) not in _KEEPS_ITS_JOB
    ]


class SchedulingMixin:
    """The schedule and retention operations of the Storage Contract, through the ORM."""

    using: str

    if TYPE_CHECKING:  # provided by DjangoStore

        def _write(self) -> AbstractContextManager[None]: ...

        def _audit(
            self, actor: str, action: str, target: object, now: datetime, detail: str = ""
        ) -> None: ...

        def _hint_this_process(self, queues: Sequence[str]) -> None: ...

        def _among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]: ...

    # -- the set of schedules ----------------------------------------------------------------------

    def sync_schedules(self, definitions: Sequence[ScheduleDefinition], *, now: datetime) -> SyncResult:
        for attempt in range(_SYNC_ATTEMPTS):
            try:
                return self._sync_once(definitions, now)
            except IntegrityError:  # workers starting together inserted the same new schedule: compare again
                if attempt == _SYNC_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _sync_once(self, definitions: Sequence[ScheduleDefinition], now: datetime) -> SyncResult:
        added, changed = [], []
        wanted = {d.name: d for d in definitions}
        with self._write():
            rows = Schedule.objects.using(self.using).select_for_update()
            stored = {row.name: row for row in rows.filter(name__in=list(wanted))}
            for name, definition in wanted.items():
                values = _definition_values(definition)
                row = stored.get(name)
                if row is None:
                    Schedule.objects.using(self.using).create(
                        name=name, cursor=now, created_at=now, updated_at=now, **values
                    )
                    added.append(name)
                elif row.removed_at is not None or any(getattr(row, f) != v for f, v in values.items()):
                    Schedule.objects.using(self.using).filter(name=name).update(
                        removed_at=None, updated_at=now, **values
                    )  # its cursor stays: a redefined schedule is not replayed
                    changed.append(name)
            gone = (
                Schedule.objects.using(self.using)
                .filter(removed_at__isnull=True)
                .exclude(name__in=list(wanted))
            )
            removed = sorted(gone.values_list("name", flat=True))
            gone.update(removed_at=now, updated_at=now)
        return SyncResult(added=tuple(sorted(added)), changed=tuple(sorted(changed)), removed=tuple(removed))

    def load_schedules(self, queues: Sequence[str]) -> list[ScheduleState]:
        stored = Schedule.objects.using(self.using).filter(queue__in=list(queues), removed_at__isnull=True)
        rows = list(stored.order_by("name"))
        if not rows:
            return []
        live = Job.objects.using(self.using).filter(schedule__in=[r.name for r in rows], state__in=LIVE)
        busy = set(live.values_list("schedule", flat=True).distinct())
        return [
            ScheduleState(
                name=row.name,
                cadence=schedule_view(row).definition.cadence,
                misfire=Misfire(row.misfire),
                no_overlap=row.no_overlap,
                cursor=row.cursor,
                paused=row.paused,
                has_live_instance=row.name in busy,
            )
            for row in rows
        ]

    def list_schedules(self) -> list[ScheduleView]:
        return [schedule_view(row) for row in Schedule.objects.using(self.using).order_by("name")]

    # -- minting -----------------------------------------------------------------------------------

    def mint(self, decisions: Sequence[MintDecision], *, now: datetime) -> int:
        minted = 0
        for decision in decisions:
            minted += self._mint_one(decision, now)
        return minted

    def _mint_one(self, decision: MintDecision, now: datetime) -> int:
        with self._write():
            row = (
                Schedule.objects.using(self.using)
                .select_for_update()
                .filter(name=decision.schedule, cursor=decision.expected_cursor, removed_at__isnull=True)
                .first()
            )
            if row is None:
                return 0  # another node moved the cursor first, or the schedule is gone
            skips = [*json.loads(row.recent_skips), *(t.isoformat() for t in decision.skipped)]
            values: dict[str, Any] = {
                "cursor": decision.new_cursor,
                "skipped_count": F("skipped_count") + decision.skipped_count,
                "recent_skips": json.dumps(skips[-MAX_RECORDED_SKIPS:]),
            }
            if decision.ticks:
                values["last_run_at"] = max(decision.ticks)
            Schedule.objects.using(self.using).filter(name=row.name).update(**values)
            inserted = self._insert_runs(row, decision.ticks, now)
        return inserted

    def _insert_runs(self, row: Schedule, ticks: Sequence[datetime], now: datetime) -> int:
        """One job per tick, due at its tick; a tick minted already (by anyone) is left as it is (the unique
        constraint stands behind this check, for a race)."""
        jobs = Job.objects.using(self.using)
        minted = set(
            jobs.filter(schedule=row.name, scheduled_for__in=list(ticks)).values_list(
                "scheduled_for", flat=True
            )
        )
        new = [tick for tick in ticks if tick not in minted]
        if not new:
            return 0
        jobs.bulk_create(
            [
                Job(
                    wire_name=row.wire_name,
                    queue=row.queue,
                    payload=row.payload,
                    max_attempts=row.max_attempts,
                    timeout=row.timeout,
                    due_at=tick,
                    created_at=now,
                    schedule=row.name,
                    scheduled_for=tick,
                )
                for tick in new
            ],
            ignore_conflicts=True,
        )
        self._hint_this_process([row.queue])
        return len(new)

    # -- operator actions --------------------------------------------------------------------------

    def _set_paused(self, name: str, paused: bool, actor: str, now: datetime) -> bool:
        action = AuditAction.PAUSE_SCHEDULE if paused else AuditAction.RESUME_SCHEDULE
        with self._write():
            found = Schedule.objects.using(self.using).filter(name=name, removed_at__isnull=True)
            if not found.update(paused=paused, updated_at=now):
                return False
            self._audit(actor, action, name, now)
        return True

    def pause_schedule(self, name: str, *, actor: str, now: datetime) -> bool:
        return self._set_paused(name, True, actor, now)

    def resume_schedule(self, name: str, *, actor: str, now: datetime) -> bool:
        return self._set_paused(name, False, actor, now)

    def trigger_schedule(self, name: str, *, actor: str, now: datetime) -> TriggerResult:
        with self._write():
            row = Schedule.objects.using(self.using).filter(name=name, removed_at__isnull=True).first()
            if row is None:
                return TriggerResult.NOT_FOUND
            self._insert_runs(row, [now], now)
            self._audit(actor, AuditAction.TRIGGER_SCHEDULE, name, now)
        return TriggerResult.TRIGGERED

    # -- retention ---------------------------------------------------------------------------------

    def purge(self, rules: Sequence[PurgeRule], *, max_jobs: int, dry_run: bool = False) -> int:
        purged = 0
        for rule in rules:
            if purged >= max_jobs:
                break
            changes.check_purge(rule.states)  # a rule that named a live state would be a bug: never delete
            purged += self._purge_rule(rule, max_jobs - purged, dry_run)
        return purged

    def _purge_rule(self, rule: PurgeRule, limit: int, dry_run: bool) -> int:
        jobs = Job.objects.using(self.using)
        finished = jobs.filter(terminal_at__lt=rule.before)
        for needed in _protected_job_ids(self.using):
            finished = finished.exclude(id__in=needed)
        if dry_run:
            return int(
                finished.filter(queue__in=list(rule.queues), state__in=list(rule.states))[:limit].count()
            )
        with self._write():
            ids: list[int] = []
            # Queue by queue and state by state, each oldest first along backwave_job_queue_state: a batch
            # reads what it deletes, never the whole history.
            for queue in rule.queues:
                for state in rule.states:
                    if len(ids) >= limit:
                        break
                    oldest = finished.filter(queue=queue, state=state).order_by("terminal_at")
                    ids += oldest.select_for_update(skip_locked=True).values_list("id", flat=True)[
                        : limit - len(ids)
                    ]
            if not ids:
                return 0
            return self._delete_finished(ids)

    def _delete_finished(self, ids: list[int]) -> int:
        """Delete these finished jobs with their outcomes, leases and audit records: plain DELETEs by id (an
        ORM delete spends most of a batch building lookups), or Django's delete when a model of the project
        points at jobs with CASCADE or SET_NULL, so that what it declared happens."""
        audit = [str(AuditAction.CANCEL), str(AuditAction.REQUEUE)]
        finished = [str(state) for state in TERMINAL_STATES]
        if _cascading_relations():
            Outcome.objects.using(self.using).filter(job_id__in=ids).delete()
            targets = [str(i) for i in ids]
            AuditRecord.objects.using(self.using).filter(target__in=targets, action__in=audit).delete()
            deleted = Job.objects.using(self.using).filter(id__in=ids, state__in=finished).delete()
            return int(deleted[1].get(Job._meta.label, 0))
        with connections[self.using].cursor() as cursor:
            for model in (Outcome, Lease):
                cursor.execute(*self._delete_where(model, ("job_id", ids)))
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
