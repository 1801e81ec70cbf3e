"""Each invariant trips, under its own name, on a violation made by hand.

The store-side invariants are fed hand-made changes; the shell-side ones run a real seed with a small
subclass that breaks the one rule they guard (the seed is one known to reach that rule). Those of schedules
and retention are in ``test_schedule_invariants``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core import events as ev
from backwave_django.core.deadlines import Deadline, Kind
from backwave_django.core.driver import DriverConfig, NodeDriver
from backwave_django.core.elastic import Starvation
from backwave_django.core.health import Health
from backwave_django.core.records import ClaimedJob, OutcomeKind
from backwave_django.core.states import State
from backwave_django.simulation import cluster
from backwave_django.simulation.executor import attempt_tag
from backwave_django.simulation.invariants import INVARIANTS, Checker, Violation
from backwave_django.simulation.run import Plant, run
from backwave_django.store.contract import JobView, LeaseView, OutcomeView, QueueView, StoreError
from backwave_django.store.memory import JobChange, MemoryStore

from .test_dependency_invariants import HAND_MADE as DEPENDENCIES
from .test_feature_invariants import HAND_MADE as FEATURES
from .test_schedule_invariants import HAND_MADE as SCHEDULES

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LATER = T0 + timedelta(seconds=60)
WORKER = "node0:1:g0:0"


def view(**fields: Any) -> JobView:
    defaults: dict[str, Any] = dict(
        id=1, wire_name="sim.job", queue="q0", payload="0", state=State.SCHEDULED, attempt=0, max_attempts=3,
        due_at=T0, created_at=T0, terminal_at=None, terminal_cause="", cancel_requested=False,
    )  # fmt: skip
    return JobView(**{**defaults, **fields})


def lease(owner: str = WORKER, attempt: int = 1, expires_at: datetime = LATER) -> LeaseView:
    return LeaseView(job_id=1, queue="q0", owner=owner, attempt=attempt, claimed_at=T0, expires_at=expires_at)


def outcome(
    kind: OutcomeKind, state: State, worker: str = WORKER, attempt: int = 1, **more: Any
) -> OutcomeView:
    fields: dict[str, Any] = dict(
        job_id=1, attempt=attempt, worker=worker, kind=kind, state_after=state, message="", detail="",
        recorded_at=T0, started_at=T0,
    )  # fmt: skip
    return OutcomeView(**{**fields, **more})


def claimed(checker: Checker, *, attempt: int = 1, owner: str = WORKER, max_attempts: int = 3) -> JobView:
    """A job born and claimed, as the store would report them."""
    born = view(max_attempts=max_attempts)
    checker.on_change(JobChange(operation="enqueue", now=T0, before=None, after=born))
    held = replace(born, state=State.LEASED, attempt=attempt)
    change = JobChange(
        operation="claim", now=T0, before=born, after=held, lease_after=lease(owner=owner, attempt=attempt)
    )
    checker.on_change(change)
    return held


def ended(
    checker: Checker,
    before: JobView,
    kind: OutcomeKind,
    state: State,
    *,
    operation: str = "report",
    **more: Any,
) -> None:
    after = replace(before, state=state, attempt=before.attempt - (kind is OutcomeKind.RELEASED))
    made = outcome(kind, state, attempt=before.attempt, **more)
    held = lease(expires_at=T0 if operation == "expire" else LATER)  # an expiry ends a lapsed lease
    checker.on_change(
        JobChange(operation=operation, now=T0, before=before, after=after, lease_before=held, outcome=made)
    )


# -- store-side: hand-made changes ------------------------------------------------------------------------


def job_lost(checker: Checker) -> None:
    claimed(checker)
    checker.accepted([99])


def outcome_twice(checker: Checker) -> None:
    held = claimed(checker)
    ended(checker, held, OutcomeKind.FAILED, State.SCHEDULED)
    ended(checker, checker.jobs[held.id], OutcomeKind.FAILED, State.SCHEDULED)  # the same Attempt, again


def outcome_from_stranger(checker: Checker) -> None:
    held = claimed(checker)
    ended(checker, held, OutcomeKind.FAILED, State.SCHEDULED, worker="node1:1:g0:0")


def success_never_run(checker: Checker) -> None:
    ended(checker, claimed(checker), OutcomeKind.SUCCEEDED, State.SUCCEEDED)


def illegal_move(checker: Checker) -> None:
    born = view()
    checker.on_change(JobChange(operation="enqueue", now=T0, before=None, after=born))
    checker.on_change(
        JobChange(operation="cancel", now=T0, before=born, after=replace(born, state=State.SUCCEEDED))
    )


def trace_context_rewritten(checker: Checker) -> None:
    born = view(trace_context='{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}')
    checker.on_change(JobChange(operation="enqueue", now=T0, before=None, after=born))
    checker.on_change(
        JobChange(
            operation="cancel",
            now=T0,
            before=born,
            after=replace(born, cancel_requested=True, trace_context=""),
        )
    )


def lease_without_state(checker: Checker) -> None:
    born = view()
    checker.on_change(JobChange(operation="enqueue", now=T0, before=None, after=born, lease_after=lease()))


def attempt_skipped(checker: Checker) -> None:
    claimed(checker, attempt=2)


def released_and_charged(checker: Checker) -> None:
    held = claimed(checker)
    after = replace(held, state=State.SCHEDULED)  # a release keeps the attempt: it should give it back
    made = outcome(OutcomeKind.RELEASED, State.SCHEDULED)
    checker.on_change(
        JobChange(operation="report", now=T0, before=held, after=after, lease_before=lease(), outcome=made)
    )


def retried_at_ceiling(checker: Checker) -> None:
    held = claimed(checker, max_attempts=1)
    ended(checker, held, OutcomeKind.EXPIRED, State.SCHEDULED, operation="expire")


def limit_exceeded(checker: Checker) -> None:
    checker.queues_changed([QueueView(queue="q0", paused=False, concurrency_limit=0)])
    claimed(checker)


def paused_claimed(checker: Checker) -> None:
    checker.queues_changed([QueueView(queue="q0", paused=True, concurrency_limit=None)])
    claimed(checker)


def hostile_text_stored(checker: Checker) -> None:
    held = claimed(checker)
    ended(checker, held, OutcomeKind.FAILED, State.SCHEDULED, message="a NUL \x00 stored")


def tags_from_another_attempt(checker: Checker) -> None:
    held = claimed(checker)
    after = replace(held, state=State.SCHEDULED)
    made = outcome(OutcomeKind.FAILED, State.SCHEDULED)
    stale = attempt_tag(2, "node1:1:g0:0")  # not the tag of the Attempt whose outcome this is
    checker.on_change(
        JobChange(
            operation="report",
            now=T0,
            before=held,
            after=after,
            lease_before=lease(),
            outcome=made,
            tags=(stale,),
        )
    )


def tags_written_unobserved(checker: Checker) -> None:
    born = view()
    checker.on_change(JobChange(operation="enqueue", now=T0, before=None, after=born))
    checker.audit([born], drained=False, tags={1: frozenset({attempt_tag(1, WORKER)})})


def test_an_attempts_own_tags_with_its_outcome_and_an_enqueues_pass():
    checker = Checker(lambda: 0)
    born = view(id=2)
    checker.on_change(JobChange(operation="enqueue", now=T0, before=None, after=born, tags=("given",)))
    held = claimed(checker)
    after = replace(held, state=State.SCHEDULED)
    made = outcome(OutcomeKind.FAILED, State.SCHEDULED)
    own = attempt_tag(1, WORKER)
    checker.on_change(
        JobChange(
            operation="report",
            now=T0,
            before=held,
            after=after,
            lease_before=lease(),
            outcome=made,
            tags=(own,),
        )
    )
    checker.audit([after, born], drained=False, tags={1: frozenset({own}), 2: frozenset({"given"})})


def liveness_after_drain(checker: Checker) -> None:
    born = view()
    checker.on_change(JobChange(operation="enqueue", now=T0, before=None, after=born))
    checker.audit([born], drained=True)


HAND_MADE: dict[str, Callable[[Checker], None]] = {
    "NoJobLost": job_lost,
    "OneOutcomePerAttempt": outcome_twice,
    "OutcomeFromLeaseHolder": outcome_from_stranger,
    "OutcomeMatchesRun": success_never_run,
    "LegalTransition": illegal_move,
    "TraceContextKept": trace_context_rewritten,
    "LeaseMatchesState": lease_without_state,
    "AttemptAccounting": released_and_charged,
    "AttemptCeiling": retried_at_ceiling,
    "ConcurrencyLimit": limit_exceeded,
    "PausedQueueNotClaimed": paused_claimed,
    "StoredTextBounded": hostile_text_stored,
    "TagsFromFencedOutcome": tags_from_another_attempt,
    "DrainLiveness": liveness_after_drain,
}


def test_tags_the_store_holds_unobserved_break_the_tag_invariant():
    with pytest.raises(Violation, match="TagsFromFencedOutcome"):
        tags_written_unobserved(Checker(lambda: 0))


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_a_store_side_invariant_trips_on_a_hand_made_violation(name):
    with pytest.raises(Violation) as raised:
        HAND_MADE[name](Checker(lambda: 0))
    assert raised.value.name == name


def test_an_attempt_that_skips_a_number_breaks_the_accounting():
    with pytest.raises(Violation, match="AttemptAccounting"):
        attempt_skipped(Checker(lambda: 0))


def test_a_clean_life_trips_nothing():
    checker = Checker(lambda: 0)
    held = claimed(checker)
    checker.returned[WORKER, 1, 1] = None
    ended(checker, held, OutcomeKind.SUCCEEDED, State.SUCCEEDED)
    checker.audit([replace(held, state=State.SUCCEEDED)], drained=True)
    assert checker.checks > 10 and checker.live == 0


# -- shell-side: a real run with one rule broken ------------------------------------------------------------


class NeverAbandons(NodeDriver):
    def _fire(self, deadline: Deadline, now: datetime) -> list[cmd.Command]:
        return [] if deadline.kind in (Kind.TIMEOUT, Kind.ABANDON) else super()._fire(deadline, now)


class StartsAfterGrace(NodeDriver):
    def _ask_all_to_stop(self, now: datetime) -> list[cmd.Command]:
        commands = super()._ask_all_to_stop(now)
        self.grace_over = False
        return commands


class NeverStops(NodeDriver):
    def _stop_if_idle(self) -> list[cmd.Command]:
        return []


class NeverCalm(Starvation):
    """Starved from its first claim on, whatever its claims: a group grows as soon as it may, and keeps its
    added Pumps for good."""

    @property
    def starved(self) -> bool:
        return True

    def observe(self, asked: int, got: int, now: datetime) -> None:
        self.last_starved = now


class AlwaysStarved(NodeDriver):
    def __init__(self, config: DriverConfig) -> None:
        super().__init__(config)
        self.starvation = NeverCalm(wide=self.starvation.wide)


class NeverWritesWhenIdle(NodeDriver):
    def _on_idle(self, event: ev.Idle) -> list[cmd.Command]:
        return []


class StatusAfterStop(NodeDriver):
    def _stop_if_idle(self) -> list[cmd.Command]:
        commands = super()._stop_if_idle()
        return [*commands, cmd.RecordStatus(health=Health.RUNNING, detail="")] if commands else commands


class Greedy(NodeDriver):
    @property
    def available(self) -> int:
        return 8


class RaisesWhenIdle(NodeDriver):
    def step(self, event: ev.Event) -> list[cmd.Command]:
        if isinstance(event, ev.Idle):
            raise RuntimeError("a bug in the Driver")
        return super().step(event)


class HoardsDeadlines(NodeDriver):
    """Adds a deadline that never comes due on every step: the heap grows with the steps, not the Attempts."""

    def step(self, event: ev.Event) -> list[cmd.Command]:
        self.deadlines.add(datetime.max.replace(tzinfo=UTC), Kind.GIVE_UP)
        return super().step(event)


class FencesEveryone(MemoryStore):
    @staticmethod
    def _holds(lease: LeaseView | None, worker_id: str, attempt: int, now: datetime) -> bool:
        return False


class BreaksOnClaim(MemoryStore):
    def claim(self, **request: Any) -> list[ClaimedJob]:
        if request["max_jobs"] > 0 and self.all_jobs():
            raise StoreError("a bug in the store")
        return super().claim(**request)


class ClaimsNothing(MemoryStore):
    def claim(self, **request: Any) -> list[ClaimedJob]:
        return []


SHELL_SIDE: dict[str, tuple[int, Plant]] = {
    "PumpPoolBound": (2, Plant(name="greedy", description="", driver_class=Greedy)),
    "TimeLimitHolds": (2, Plant(name="no time limit", description="", driver_class=NeverAbandons)),
    "NothingStartsAfterGrace": (163, Plant(name="late start", description="", driver_class=StartsAfterGrace)),
    "ShutdownBounded": (15, Plant(name="no stop", description="", driver_class=NeverStops)),
    "PumpsGrowOnlyWhenStarved": (0, Plant(name="starved", description="", driver_class=AlwaysStarved)),
    "OutcomesLingerBounded": (3, Plant(name="never idle", description="", driver_class=NeverWritesWhenIdle)),
    "StatusFinal": (3, Plant(name="status after stop", description="", driver_class=StatusAfterStop)),
    "PumpLoopSound": (0, Plant(name="raises", description="", driver_class=RaisesWhenIdle)),
    "DeadlinesFollowAttempts": (0, Plant(name="hoards", description="", driver_class=HoardsDeadlines)),
    "FenceAdmitsHolder": (0, Plant(name="fences all", description="", store_class=FencesEveryone)),
    "StoreSound": (0, Plant(name="store bug", description="", store_class=BreaksOnClaim)),
}


@pytest.mark.parametrize("name", sorted(SHELL_SIDE))
def test_a_shell_side_invariant_trips_on_a_run_that_breaks_it(name):
    seed, plant = SHELL_SIDE[name]
    outcome = run(seed, plant=plant)
    assert outcome.violation is not None and outcome.violation.name == name, outcome.violation


def test_a_run_whose_claims_take_nothing_breaks_the_claim_order_before_it_fails_the_drain():
    outcome = run(0, plant=Plant(name="idle", description="", store_class=ClaimsNothing))
    assert outcome.violation is not None and outcome.violation.name == "ClaimOrder"


def test_a_run_past_its_action_budget_is_a_livelock(monkeypatch):
    monkeypatch.setattr(cluster, "MAX_ACTIONS", 50)
    outcome = run(0)
    assert outcome.violation is not None and outcome.violation.name == "NoLivelock"


def test_every_invariant_has_a_violation_made_by_hand():
    covered: Sequence[str] = [*HAND_MADE, *SHELL_SIDE, *SCHEDULES, *FEATURES, *DEPENDENCIES, "NoLivelock"]
    assert sorted(covered) == sorted(INVARIANTS)
