"""The invariants of schedules: each tick minted once, coalesce, no-overlap, removal, accounting, liveness.

The checker sees each minted job as the store creates it (``observe``), and each mint call whole: the
simulated Pump hands the store a wrapped ``mint`` (:meth:`ScheduleWatch.minter`) that reads the schedules
before and after the call, with what the Pump's last load read (so a late commit, landing seconds later, is
judged against what its Pump decided from). At the end of a run every stored schedule's cursor is
accounted for, tick by tick.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..core.schedules import Cadence, MintDecision, Misfire, ScheduleState
from ..store.contract import JobView, ScheduleView
from ..store.memory import JobChange, MemoryStore, TransientFault

if TYPE_CHECKING:
    from .invariants import Checker

#: When the drain stops minting (the healed cluster has been whole for 10 s), no schedule may have a tick
#: older than this undecided: every Pump loads its schedules when it starts, then each maintenance interval
#: (at most 5 s), and a store backoff lasts at most 5 s.
KEEP_UP = timedelta(seconds=15)
#: No run walks more ticks than this when accounting for a cursor (a run is minutes of virtual time).
MAX_TICKS = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Loaded:
    """What a Pump's last LoadSchedules read, when (on its clock), and its misfire grace."""

    at: datetime
    grace: timedelta
    schedules: Mapping[str, ScheduleState]


def ticks_between(cadence: Cadence, after: datetime, until: datetime) -> Iterator[datetime]:
    """The ticks of ``cadence`` strictly after ``after`` and at most ``until``."""
    tick = cadence.next_after(after)
    for _ in range(MAX_TICKS):
        if tick > until:
            return
        yield tick
        tick = cadence.next_after(tick)
    raise AssertionError(f"more than {MAX_TICKS} ticks between {after} and {until}")


class ScheduleWatch:
    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self.no_overlap: frozenset[str] = frozenset()  # NO_OVERLAP schedules (their settings never change)
        self.live: Counter[str] = Counter()  # live runs per schedule
        self.minted: set[tuple[str, datetime]] = set()  # (schedule, tick) of every run a mint made, ever
        self.triggered: set[tuple[str, datetime]] = set()  # (schedule, instant) of every run now
        self.log: list[JobView] = []  # every run minted, in order

    # -- each change to a scheduled job --------------------------------------------------------------

    def changed(self, change: JobChange) -> None:
        before, after = change.before, change.after
        job = after or before
        assert job is not None and job.schedule is not None
        name = job.schedule
        was = before is not None and not before.state.is_terminal
        now = after is not None and not after.state.is_terminal
        if before is None and after is not None and after.scheduled_for is not None:
            key = (name, after.scheduled_for)
            if change.operation == "mint":
                self._minted(name, key, after)
            else:
                self.triggered.add(key)
        self.live[name] += now - was

    def _minted(self, name: str, key: tuple[str, datetime], run: JobView) -> None:
        check = self.checker
        check.expect(
            key not in self.minted,
            "TickMintedOnce",
            lambda: f"schedule {name}'s tick {key[1]} minted again (job {run.id})",
        )
        check.expect(
            name not in self.no_overlap or self.live[name] == 0,
            "NoOverlap",
            lambda: f"schedule {name}'s tick {key[1]} minted (job {run.id}), {self.live[name]} run(s) live",
        )
        self.minted.add(key)
        self.log.append(run)

    # -- each mint call, whole ---------------------------------------------------------------------

    def minter(self, store: MemoryStore, loaded: Loaded | None) -> Callable[..., int]:
        """``store.mint``, watched: the invariants of one mint call, judged against ``loaded``."""

        def mint(*, decisions: Sequence[MintDecision], now: datetime) -> int:
            before = {view.name: view for view in store.list_schedules()}
            busy = frozenset(name for name in self.no_overlap if self.live[name])  # as the store will see
            first = len(self.log)
            try:
                minted = store.mint(decisions, now=now)
            except TransientFault:  # a fault after a commit: what committed is judged all the same
                self._landed(before, store.list_schedules(), self.log[first:], loaded, busy)
                raise
            self._landed(before, store.list_schedules(), self.log[first:], loaded, busy)
            return minted

        mint.__name__ = "mint"
        return mint

    def _landed(
        self,
        before: Mapping[str, ScheduleView],
        after: Sequence[ScheduleView],
        runs: Sequence[JobView],
        loaded: Loaded | None,
        busy: frozenset[str],
    ) -> None:
        for view in after:
            old = before.get(view.name)
            mine = [run for run in runs if run.schedule == view.name]
            if old is not None and (old.cursor != view.cursor or mine):
                self._moved(old, view, mine, loaded, view.name in busy)

    def _moved(
        self, old: ScheduleView, new: ScheduleView, runs: list[JobView], loaded: Loaded | None, busy: bool
    ) -> None:
        self.checker.expect(
            old.removed_at is None,
            "RemovedScheduleIdle",
            lambda: f"schedule {new.name}, removed at {old.removed_at}, moved to {new.cursor} ({runs})",
        )
        state = loaded.schedules.get(new.name) if loaded is not None else None
        if state is not None and loaded is not None and old.definition.misfire is Misfire.COALESCE:
            self._coalesced(old, new, runs, state, loaded, busy)

    def _coalesced(
        self,
        old: ScheduleView,
        new: ScheduleView,
        runs: list[JobView],
        state: ScheduleState,
        loaded: Loaded,
        busy: bool,
    ) -> None:
        missed_before = loaded.at - loaded.grace  # a tick before this was missed when the Pump read it
        make_ups = [r.scheduled_for for r in runs if r.scheduled_for and r.scheduled_for < missed_before]
        self.checker.expect(
            len(make_ups) <= 1,
            "CoalesceOneMakeUp",
            lambda: f"schedule {new.name} made up for missed ticks {len(make_ups)} times: {make_ups}",
        )
        if old.definition.cadence.next_after(old.cursor) >= missed_before:
            return  # nothing was missed: an ordinary move
        # Busy when read, or by the time it minted (a run now, or a requeue, in between): nothing to make up.
        idle = state.paused or (state.no_overlap and (state.has_live_instance or busy))
        covered = runs or any(name == new.name and old.cursor < t <= new.cursor for name, t in self.triggered)
        self.checker.expect(
            idle or bool(covered),
            "CoalesceOneMakeUp",
            lambda: f"schedule {new.name} passed missed ticks from {old.cursor} to {new.cursor} and ran none",
        )

    # -- the end of the workload, and of the run ---------------------------------------------------

    def keeping_up(self, views: Sequence[ScheduleView], now: datetime) -> None:
        """When the drain stops minting: every schedule still in the settings has kept up."""
        for view in views:
            if view.removed_at is None:
                self._kept_up(view, now)

    def _kept_up(self, view: ScheduleView, now: datetime) -> None:
        late = view.definition.cadence.next_after(view.cursor)
        self.checker.expect(
            late > now - KEEP_UP,
            "ScheduleLiveness",
            lambda: f"schedule {view.name}'s tick {late} is undecided at {now} (cursor {view.cursor})",
        )

    def account(self, views: Sequence[ScheduleView]) -> None:
        """Every tick a cursor passed: minted, run now at that instant, or counted skipped, exactly once."""
        for view in views:
            self._accounted(view)

    def _accounted(self, view: ScheduleView) -> None:
        ticks = set(ticks_between(view.definition.cadence, view.created_at, view.cursor))
        minted = {t for name, t in self.minted if name == view.name}
        ran = minted | {t for name, t in self.triggered if name == view.name and t in ticks}
        self.checker.expect(
            minted <= ticks and len(ran) + view.skipped_count == len(ticks),
            "TickAccounting",
            lambda: (
                f"schedule {view.name} passed {len(ticks)} ticks: {len(minted)} minted, "
                f"{len(ran) - len(minted)} run now, {view.skipped_count} skipped, "
                f"{len(minted - ticks)} not ticks of its cadence"
            ),
        )
