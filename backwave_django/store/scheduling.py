"""Schedules in the Django stores (mixed into ``DjangoStore``; retention is ``store/retention.py``).

Every tick is minted at most once across a cluster, by two guarantees that do not depend on each other: the
cursor moves by compare-and-set (a node whose read is stale changes nothing), and a job's (schedule, tick) is
unique in the database (``backwave_job_schedule_tick``), so even a second insert of a tick inserts nothing.

A NO_OVERLAP schedule never gets a tick's run beside a live one: every path that makes a run of a schedule
live (a mint, "run now", a requeue of one of its runs) holds the schedule's row lock while it does
(:meth:`SchedulingMixin._lock_schedule`), and a mint asks again under that lock whether a run is live.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError
from django.db.models import F

from ..core.records import AuditAction
from ..core.schedules import MAX_RECORDED_SKIPS, MintDecision, Misfire, ScheduleState, confirmed
from ..core.states import State
from ..models import Job, Schedule
from . import announced
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


class SchedulingMixin:
    """The schedule operations of the Storage Contract, through the ORM."""

    using: str

    if TYPE_CHECKING:  # provided by DjangoStore

        def _write(self) -> AbstractContextManager[None]: ...

        def _audit(
            self, actor: str, action: str, target: object, now: datetime, detail: str = ""
        ) -> None: ...

        def _hint_this_process(self, queues: Sequence[str]) -> None: ...

        def _announce(self, build: Callable[[], list[announced.Transition]]) -> None: ...

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
            decision = confirmed(  # a run may have become live since the schedule was loaded
                decision, no_overlap=row.no_overlap, has_live_instance=lambda: self._has_live_run(row.name)
            )
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

    def _has_live_run(self, name: str) -> bool:
        return Job.objects.using(self.using).filter(schedule=name, state__in=LIVE).exists()

    def _lock_schedule(self, name: str) -> Schedule | None:
        """Inside a write transaction: the schedule's row (not removed), locked until the transaction ends,
        or None. Taken by every path that makes a run of the schedule live, before it touches a job."""
        found = Schedule.objects.using(self.using).select_for_update()
        return found.filter(name=name, removed_at__isnull=True).first()

    def _insert_runs(
        self, row: Schedule, ticks: Sequence[datetime], now: datetime, operation: str = "mint"
    ) -> int:
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
        self._announce(lambda: self._minted(row, new, operation))
        return len(new)

    def _minted(self, row: Schedule, ticks: Sequence[datetime], operation: str) -> list[announced.Transition]:
        """The jobs just minted for these ticks (a bulk insert that passes over conflicts returns no ids)."""
        found = Job.objects.using(self.using).filter(schedule=row.name, scheduled_for__in=list(ticks))
        return [
            announced.Transition(
                job_id=job_id,
                wire_name=row.wire_name,
                queue=row.queue,
                from_state=None,
                to_state=State.SCHEDULED,
                attempt=0,
                cause="",
                operation=operation,
            )
            for job_id in found.order_by("id").values_list("id", flat=True)
        ]

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
            row = self._lock_schedule(name)  # a mint in flight sees this run as live, or has committed
            if row is None:
                return TriggerResult.NOT_FOUND
            self._insert_runs(row, [now], now, "trigger")
            self._audit(actor, AuditAction.TRIGGER_SCHEDULE, name, now)
        return TriggerResult.TRIGGERED
