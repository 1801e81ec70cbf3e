"""Engine fixes undone, one at a time: what each kept regression seed must still catch.

Every bug the simulator found in the engine was fixed, and its seed kept (``tests/simulation/regressions``).
A kept seed proves something only while it still reaches the code its fix changed: a change to the
simulator (a new fault, a new call in the Pump's cycle) moves every run, and can move a kept seed away from
its bug without anyone noticing. So each fix is also kept here undone, as a :class:`~.run.Plant` (the
product's class with the fix taken out, used by nothing but the regression test), and the regression test
checks both halves: the kept run is clean, and with its fix undone it trips the invariant it tripped when it
was found. When a simulator change breaks the second half, ``--rerecord`` finds the kept seed's bug again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from ..core import commands as cmd
from ..core import events as ev
from ..core.deadlines import Deadline, Kind
from ..core.driver import NodeDriver
from ..core.records import OutcomeKind, OutcomeReport
from ..core.retry import RetryPolicy
from ..core.transitions import LEASE_ENDINGS
from ..store.contract import OutcomeDetail, ReportResult
from ..store.memory import MemoryStore
from .run import Plant


class _TimeLimitYieldsToCancel(NodeDriver):
    """Undoes 63d5a16: a handler an operator already asked to stop is never cut off at its time limit."""

    def _fire(self, deadline: Deadline, now: datetime) -> list[cmd.Command]:
        running = self.executing.get(deadline.job_id) if deadline.job_id is not None else None
        timed_out = deadline.kind is Kind.TIMEOUT and running is not None
        if timed_out and running is not None and running.job.attempt == deadline.attempt and running.stopping:
            return []
        return super()._fire(deadline, now)


class _FlushWindowKeepsWrites(NodeDriver):
    """Undoes a21672b: a batch whose write was in flight when the final flush window ended is kept."""

    @property
    def given_up(self) -> bool:
        return False

    @given_up.setter
    def given_up(self, value: bool) -> None:
        pass


class _StartsClaimsAfterGrace(NodeDriver):
    """Undoes 005d2fd: jobs whose claim lands after the grace (but before the cut-off) are started."""

    @property
    def grace_over(self) -> bool:
        return self.cut_off

    @grace_over.setter
    def grace_over(self, value: bool) -> None:
        pass


class _ReclaimHalts(NodeDriver):
    """Undoes 919157b: a Pump that claims again a job it still runs trips an assertion."""

    def _on_claim_completed(self, event: ev.ClaimCompleted) -> list[cmd.Command]:
        if not self.grace_over:
            for job in event.jobs:
                if job.id in self.executing:
                    raise AssertionError(f"job {job.id} was claimed while this pump already runs it")
        return super()._on_claim_completed(event)


class _CancelledReleaseCharges(MemoryStore):
    """Undoes 701fa6a: a job given back at shutdown whose cancel was asked is cancelled with the released
    Attempt still counted."""

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail] | None = None,
    ) -> ReportResult:
        rows = {k: rule for k, rule in LEASE_ENDINGS.items() if k[0] is OutcomeKind.RELEASED and k[2]}
        LEASE_ENDINGS.update({k: replace(rule, attempt_delta=0) for k, rule in rows.items()})
        try:
            return super().report(worker_id=worker_id, reports=reports, retry=retry, now=now, details=details)
        finally:
            LEASE_ENDINGS.update(rows)


class _StepAfterStop(NodeDriver):
    """Undoes d5398ec: when a deadline ends the drain at the start of a step, the step's event is still
    handled after the Stop."""

    def step(self, event: ev.Event) -> list[cmd.Command]:
        if self.stopped or self.halted:
            return []
        self.now = event.now
        commands = self._fire_deadlines(event.now)
        commands += self._dispatch(event)
        if self.stopped or self.halted:
            return commands
        return commands + self._wake()


#: Each engine fix undone, by the name a regression file gives in ``bug``.
REVERTED: dict[str, Plant] = {
    plant.name: plant
    for plant in (
        Plant(
            name="time-limit-yields-to-cancel",
            description="63d5a16 undone: a handler asked to stop by an operator is never cut off",
            driver_class=_TimeLimitYieldsToCancel,
        ),
        Plant(
            name="flush-window-keeps-writes",
            description="a21672b undone: a batch in flight when the final flush window ends is kept",
            driver_class=_FlushWindowKeepsWrites,
        ),
        Plant(
            name="starts-claims-after-grace",
            description="005d2fd undone: jobs claimed after the grace, before the cut-off, are started",
            driver_class=_StartsClaimsAfterGrace,
        ),
        Plant(
            name="reclaim-halts",
            description="919157b undone: claiming again a job the Pump still runs halts it",
            driver_class=_ReclaimHalts,
        ),
        Plant(
            name="cancelled-release-charges",
            description="701fa6a undone: a release cancelled instead keeps its Attempt counted",
            store_class=_CancelledReleaseCharges,
        ),
        Plant(
            name="step-after-stop",
            description="d5398ec undone: a step goes on after a deadline's Stop",
            driver_class=_StepAfterStop,
        ),
    )
}
