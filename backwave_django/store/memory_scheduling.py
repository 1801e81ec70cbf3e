"""Schedules and retention in the in-memory store (mixed into ``MemoryStore``), with the same guarantees as
the Django stores: the cursor moves by compare-and-set, and a (schedule, tick) is minted at most once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ..core.records import AuditAction
from ..core.retention import PurgeRule
from ..core.schedules import MAX_RECORDED_SKIPS, MintDecision, ScheduleState, confirmed
from ..core.states import State
from ..core.values import replace
from . import changes
from .contract import (
    AuditView,
    JobView,
    OutcomeView,
    ScheduleDefinition,
    ScheduleView,
    SyncResult,
    TriggerResult,
)

if TYPE_CHECKING:
    from .memory import _AnnouncingLock


class MemorySchedulingMixin:
    """The schedule and retention operations of the Storage Contract, in memory."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _lock: _AnnouncingLock
        _jobs: dict[int, JobView]
        _live_runs: Counter[str]
        _ticks: set[tuple[str, datetime]]
        _outcomes: dict[int, list[OutcomeView]]
        _audit: list[AuditView]
        _next_id: int
        hints: Callable[[Sequence[str]], None] | None

        def _fault(self, operation: str, when: str) -> None: ...

        def _put(self, job: JobView) -> None: ...

        def _drop(self, job_id: int) -> None: ...

        def _waited_on(self, job_id: int) -> bool: ...

        def _observed(
            self, operation: str, now: datetime, before: JobView | None, after: JobView | None
        ) -> None: ...

        def _record(
            self, actor: str, action: str, target: object, now: datetime, detail: str = ""
        ) -> None: ...

    _schedules: dict[str, ScheduleView]

    def _schedule_table(self) -> dict[str, ScheduleView]:
        return self._schedules

    def sync_schedules(self, definitions: Sequence[ScheduleDefinition], *, now: datetime) -> SyncResult:
        with self._lock:
            table = self._schedule_table()
            added, changed = [], []
            for definition in definitions:
                stored = table.get(definition.name)
                if stored is None:
                    table[definition.name] = ScheduleView(
                        definition=definition, cursor=now, paused=False, removed_at=None, skipped_count=0,
                        recent_skips=(), last_run_at=None, created_at=now, updated_at=now,
                    )  # fmt: skip
                    added.append(definition.name)
                elif stored.definition != definition or stored.removed_at is not None:
                    table[definition.name] = replace(
                        stored, definition=definition, removed_at=None, updated_at=now
                    )
                    changed.append(definition.name)
            wanted = {d.name for d in definitions}
            removed = sorted(n for n, s in table.items() if n not in wanted and s.removed_at is None)
            for name in removed:
                table[name] = replace(table[name], removed_at=now, updated_at=now)
        return SyncResult(added=tuple(sorted(added)), changed=tuple(sorted(changed)), removed=tuple(removed))

    def load_schedules(self, queues: Sequence[str]) -> list[ScheduleState]:
        with self._lock:
            self._fault("load_schedules", "before")
            found = [
                ScheduleState(
                    name=s.name,
                    cadence=s.definition.cadence,
                    misfire=s.definition.misfire,
                    no_overlap=s.definition.no_overlap,
                    cursor=s.cursor,
                    paused=s.paused,
                    has_live_instance=self._live_runs[s.name] > 0,
                )
                for s in sorted(self._schedule_table().values(), key=lambda s: s.name)
                if s.definition.queue in queues and s.removed_at is None
            ]
            self._fault("load_schedules", "after")
        return found

    def list_schedules(self) -> list[ScheduleView]:
        with self._lock:
            return [self._schedule_table()[name] for name in sorted(self._schedule_table())]

    def mint(self, decisions: Sequence[MintDecision], *, now: datetime) -> int:
        minted = 0
        for decision in decisions:
            with self._lock:
                self._fault("mint", "before")
                minted += self._mint_one(decision, now)
                self._fault("mint", "after")
        return minted

    def _mint_one(self, decision: MintDecision, now: datetime) -> int:
        stored = self._schedule_table().get(decision.schedule)
        if stored is None or stored.removed_at is not None or stored.cursor != decision.expected_cursor:
            return 0
        decision = confirmed(  # a run may have become live since the schedule was loaded
            decision,
            no_overlap=stored.definition.no_overlap,
            has_live_instance=lambda: self._live_runs[decision.schedule] > 0,
        )
        last_run = max(decision.ticks) if decision.ticks else stored.last_run_at
        self._schedule_table()[stored.name] = replace(
            stored,
            cursor=decision.new_cursor,
            skipped_count=stored.skipped_count + decision.skipped_count,
            recent_skips=(*stored.recent_skips, *decision.skipped)[-MAX_RECORDED_SKIPS:],
            last_run_at=last_run,
        )
        return self._insert_runs(stored.definition, decision.ticks, now)

    def _insert_runs(
        self,
        definition: ScheduleDefinition,
        ticks: Sequence[datetime],
        now: datetime,
        operation: str = "mint",
    ) -> int:
        inserted = 0
        for tick in ticks:
            if (definition.name, tick) in self._ticks:
                continue  # minted already, by anyone
            job_id, self._next_id = self._next_id, self._next_id + 1
            job = JobView(
                id=job_id, wire_name=definition.wire_name, queue=definition.queue, payload=definition.payload,
                state=State.SCHEDULED, attempt=0, max_attempts=definition.max_attempts, due_at=tick,
                created_at=now, terminal_at=None, terminal_cause="", cancel_requested=False,
                timeout=definition.timeout, schedule=definition.name, scheduled_for=tick,
            )  # fmt: skip
            self._put(job)
            self._observed(operation, now, None, job)
            inserted += 1
        if inserted and self.hints is not None:
            self.hints([definition.queue])
        return inserted

    def _set_paused(self, name: str, paused: bool, actor: str, now: datetime) -> bool:
        action = AuditAction.PAUSE_SCHEDULE if paused else AuditAction.RESUME_SCHEDULE
        with self._lock:
            stored = self._schedule_table().get(name)
            if stored is None or stored.removed_at is not None:
                return False
            self._schedule_table()[name] = replace(stored, paused=paused, updated_at=now)
            self._record(actor, action, name, now)
        return True

    def pause_schedule(self, name: str, *, actor: str, now: datetime) -> bool:
        return self._set_paused(name, True, actor, now)

    def resume_schedule(self, name: str, *, actor: str, now: datetime) -> bool:
        return self._set_paused(name, False, actor, now)

    def trigger_schedule(self, name: str, *, actor: str, now: datetime) -> TriggerResult:
        with self._lock:
            stored = self._schedule_table().get(name)
            if stored is None or stored.removed_at is not None:
                return TriggerResult.NOT_FOUND
            self._insert_runs(stored.definition, [now], now, "trigger")
            self._record(actor, AuditAction.TRIGGER_SCHEDULE, name, now)
        return TriggerResult.TRIGGERED

    def purge(self, rules: Sequence[PurgeRule], *, max_jobs: int, dry_run: bool = False) -> int:
        with self._lock:
            self._fault("purge", "before")
            picked: dict[int, PurgeRule] = {}  # the jobs to delete, in order, and the rule that picked each
            for rule in rules:
                changes.check_purge(rule.states)
                due = [
                    j
                    for j in self._jobs.values()
                    if j.queue in rule.queues and j.state in rule.states
                    and j.terminal_at is not None and j.terminal_at < rule.before
                    and j.id not in picked and not self._waited_on(j.id)
                ]  # fmt: skip
                due.sort(key=lambda j: (j.terminal_at, j.id))
                picked.update((j.id, rule) for j in due[: max_jobs - len(picked)])
            if not dry_run:
                for job_id, rule in picked.items():
                    self._observed("purge", rule.before, self._jobs[job_id], None)  # now: the rule's cut-off
                    self._drop(job_id)
                targets = {str(i) for i in picked}
                actions = (AuditAction.CANCEL, AuditAction.REQUEUE)
                self._audit[:] = [a for a in self._audit if not (a.target in targets and a.action in actions)]
            self._fault("purge", "after")
        return len(picked)

    def oldest_finished(self, queues: Sequence[str] | None = None) -> dict[State, datetime]:
        found: dict[State, datetime] = {}
        with self._lock:
            for job in self._jobs.values():
                if job.terminal_at is None or (queues is not None and job.queue not in queues):
                    continue
                if job.state not in found or job.terminal_at < found[job.state]:
                    found[job.state] = job.terminal_at
        return found
