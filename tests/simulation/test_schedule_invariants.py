"""The invariants of schedules and retention, each tripped under its own name by a violation made by hand.

Jobs and schedules are fed to a checker as a store would report them (a real MemoryStore observed by the
checker where a mint call is judged whole); a clean life of each trips nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.schedules import MintDecision, Misfire, ScheduleState
from backwave_django.core.states import State
from backwave_django.simulation.invariants import INVARIANTS, Checker, Loaded, Violation
from backwave_django.store.contract import JobView, RequeueResult, ScheduleDefinition, ScheduleView
from backwave_django.store.memory import JobChange, MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EVERY = timedelta(seconds=10)
GRACE = timedelta(seconds=5)


def definition(**fields: Any) -> ScheduleDefinition:
    values: dict[str, Any] = dict(
        name="s0", wire_name="sim.job", queue="q0", payload="s0", cron="", every=EVERY, timezone="UTC",
        misfire=Misfire.SKIP, no_overlap=False, max_attempts=1, timeout=None,
    )  # fmt: skip
    return ScheduleDefinition(**{**values, **fields})


def schedule(cursor: datetime, skipped: int = 0, **fields: Any) -> ScheduleView:
    return ScheduleView(
        definition=definition(**fields), cursor=cursor, paused=False, removed_at=None, skipped_count=skipped,
        recent_skips=(), last_run_at=None, created_at=T0, updated_at=T0,
    )  # fmt: skip


def run_of(tick: datetime, job_id: int = 1, state: State = State.SCHEDULED) -> JobView:
    return JobView(
        id=job_id, wire_name="sim.job", queue="q0", payload="s0", state=state, attempt=0, max_attempts=1,
        due_at=tick, created_at=tick, terminal_at=None, terminal_cause="", cancel_requested=False,
        schedule="s0", scheduled_for=tick,
    )  # fmt: skip


def mint(checker: Checker, tick: datetime, job_id: int) -> JobView:
    run = run_of(tick, job_id)
    checker.on_change(JobChange(operation="mint", now=tick, before=None, after=run))
    return run


def observed(checker: Checker, **fields: Any) -> MemoryStore:
    store = MemoryStore(observe=checker.on_change)
    store.sync_schedules([definition(**fields)], now=T0)
    return store


def loaded(store: MemoryStore, at: datetime) -> Loaded:
    return Loaded(at=at, grace=GRACE, schedules={s.name: s for s in store.load_schedules(["q0"])})


def decide(ticks: tuple[datetime, ...], until: datetime, skipped: int = 0) -> MintDecision:
    return MintDecision(
        schedule="s0", expected_cursor=T0, new_cursor=until, ticks=ticks, skipped=(), skipped_count=skipped
    )


# -- the violations ------------------------------------------------------------------------------------


def purge_of_a_waiting_job(checker: Checker) -> None:
    job = run_of(T0)
    checker.on_change(JobChange(operation="mint", now=T0, before=None, after=job))
    checker.on_change(JobChange(operation="purge", now=T0, before=job, after=None))


def a_tick_minted_twice(checker: Checker) -> None:
    first = mint(checker, T0 + EVERY, job_id=1)
    finished = replace(first, state=State.CANCELLED, terminal_at=T0 + EVERY)
    checker.on_change(JobChange(operation="cancel", now=T0 + EVERY, before=first, after=finished))
    checker.on_change(JobChange(operation="purge", now=T0 + EVERY, before=finished, after=None))
    mint(checker, T0 + EVERY, job_id=2)  # its run was purged: the uniqueness no longer stands in the way


def a_tick_counted_twice(checker: Checker) -> None:
    mint(checker, T0 + EVERY, job_id=1)
    checker.audit([], drained=False, schedules=[schedule(T0 + 3 * EVERY, skipped=3)])  # 3 ticks, 4 counted


def overlapping_runs(checker: Checker) -> None:
    checker.schedules.no_overlap = frozenset({"s0"})
    mint(checker, T0 + EVERY, job_id=1)
    mint(checker, T0 + 2 * EVERY, job_id=2)  # the first is still waiting


def two_make_ups(checker: Checker) -> None:
    store = observed(checker, misfire=Misfire.COALESCE)
    now = T0 + 10 * EVERY  # ten ticks, eight of them missed
    seen = loaded(store, now)
    checker.minter(store, seen)(decisions=[decide((T0 + 7 * EVERY, T0 + 8 * EVERY), now, 8)], now=now)


def no_make_up(checker: Checker) -> None:
    store = observed(checker, misfire=Misfire.COALESCE)
    now = T0 + 10 * EVERY
    checker.minter(store, loaded(store, now))(decisions=[decide((), now, 10)], now=now)


def a_removed_schedule_minting(checker: Checker) -> None:
    before = replace(schedule(T0), removed_at=T0)
    checker.schedules._landed({"s0": before}, [replace(before, cursor=T0 + EVERY)], [], None, frozenset())


def a_schedule_left_behind(checker: Checker) -> None:
    checker.schedules.keeping_up([schedule(T0)], T0 + timedelta(minutes=1))


HAND_MADE: dict[str, Callable[[Checker], None]] = {
    "PurgeOnlyFinished": purge_of_a_waiting_job,
    "TickMintedOnce": a_tick_minted_twice,
    "TickAccounting": a_tick_counted_twice,
    "NoOverlap": overlapping_runs,
    "CoalesceOneMakeUp": two_make_ups,
    "RemovedScheduleIdle": a_removed_schedule_minting,
    "ScheduleLiveness": a_schedule_left_behind,
}


def test_each_is_a_named_invariant():
    assert set(HAND_MADE) <= set(INVARIANTS)


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_a_schedule_or_retention_invariant_trips_on_a_hand_made_violation(name):
    with pytest.raises(Violation) as raised:
        HAND_MADE[name](Checker(lambda: 0))
    assert raised.value.name == name


def test_coalesce_after_an_outage_must_mint_a_run_unless_the_schedule_was_paused():
    with pytest.raises(Violation, match=r"CoalesceOneMakeUp.*ran none"):
        no_make_up(Checker(lambda: 0))
    checker = Checker(lambda: 0)
    store = observed(checker, misfire=Misfire.COALESCE)
    store.pause_schedule("s0", actor="op", now=T0)
    now = T0 + 10 * EVERY
    assert checker.minter(store, loaded(store, now))(decisions=[decide((), now, 10)], now=now) == 0


# -- clean lives -----------------------------------------------------------------------------------------


def test_one_make_up_then_the_cadence_trips_nothing_and_every_tick_is_accounted_for():
    checker = Checker(lambda: 0)
    checker.schedules.no_overlap = frozenset({"s0"})
    store = observed(checker, misfire=Misfire.COALESCE, no_overlap=True)
    now = T0 + 10 * EVERY
    minted = checker.minter(store, loaded(store, now))(decisions=[decide((now,), now, 9)], now=now)
    assert minted == 1
    [run] = store.all_jobs()
    store.cancel(run.id, actor="op", now=now)  # finished: the next tick may run
    later = replace(decide((now + EVERY,), now + EVERY), expected_cursor=now)
    assert checker.minter(store, loaded(store, now + EVERY))(decisions=[later], now=now + EVERY) == 1
    checker.schedules.keeping_up(store.list_schedules(), now + EVERY)
    checker.audit(store.all_jobs(), drained=False, schedules=store.list_schedules())
    assert checker.schedules.live["s0"] == 1


def test_a_run_now_counts_as_live_but_is_not_a_tick():
    checker = Checker(lambda: 0)
    checker.schedules.no_overlap = frozenset({"s0"})
    store = observed(checker, no_overlap=True)
    store.trigger_schedule("s0", actor="op", now=T0 + EVERY / 2)
    assert checker.schedules.live["s0"] == 1 and not checker.schedules.minted
    with pytest.raises(Violation, match="NoOverlap"):  # a mint that did not ask whether a run is live
        store._insert_runs(store.list_schedules()[0].definition, [T0 + EVERY], T0 + EVERY)


def test_a_make_up_run_planned_before_a_requeue_is_skipped_by_the_store_and_trips_nothing():
    checker = Checker(lambda: 0)
    checker.schedules.no_overlap = frozenset({"s0"})
    store = observed(checker, no_overlap=True, misfire=Misfire.COALESCE)
    first_tick = T0 + EVERY
    minter = checker.minter(store, loaded(store, first_tick))
    assert minter(decisions=[decide((first_tick,), first_tick)], now=first_tick) == 1
    [first] = store.claim(
        worker_id="h:1:g:w", queues=["q0"], max_jobs=1, lease_duration=EVERY, now=first_tick
    )
    failed = OutcomeReport(job_id=first.id, attempt=1, kind=OutcomeKind.FAILED, max_attempts=1)
    store.report(worker_id="h:1:g:w", reports=[failed], retry=RetryPolicy(), now=first_tick)  # dead
    now = T0 + 10 * EVERY
    seen = loaded(store, now)  # no run live: the planner would mint the make-up run
    assert store.requeue(first.id, actor="op", now=now) is RequeueResult.REQUEUED
    later = replace(decide((now,), now, 8), expected_cursor=first_tick)
    assert checker.minter(store, seen)(decisions=[later], now=now) == 0
    [view] = store.list_schedules()
    assert (view.cursor, view.skipped_count) == (now, 9)
    checker.audit(store.all_jobs(), drained=False, schedules=store.list_schedules())


def test_a_paused_coalesce_schedule_passing_missed_ticks_trips_nothing():
    state = ScheduleState(
        name="s0", cadence=definition().cadence, misfire=Misfire.COALESCE, no_overlap=False, cursor=T0,
        paused=True, has_live_instance=False,
    )  # fmt: skip
    checker = Checker(lambda: 0)
    store = observed(checker, misfire=Misfire.COALESCE)
    now = T0 + 10 * EVERY
    seen = Loaded(at=now, grace=GRACE, schedules={"s0": state})
    checker.minter(store, seen)(decisions=[decide((), now, 10)], now=now)
    checker.audit([], drained=False, schedules=store.list_schedules())
