"""Schedules in the store: synchronised from the settings, minted by compare-and-set on the cursor, each
(schedule, tick) at most once; paused, resumed and run now by operators, audited."""

from __future__ import annotations

from datetime import timedelta

from backwave_django.core.records import AuditAction, OutcomeKind
from backwave_django.core.schedules import MintDecision, Misfire, plan
from backwave_django.core.states import State
from backwave_django.store.contract import ScheduleDefinition, TriggerResult

from ..conftest import T0
from .support import audit_rows, claim, outcome, report

HOUR = timedelta(hours=1)


def definition(name: str = "hourly", **changes: object) -> ScheduleDefinition:
    base = {
        "name": name,
        "wire_name": "tests.tick",
        "queue": "default",
        "payload": "{}",
        "cron": "0 * * * *",
        "every": None,
        "timezone": "UTC",
        "misfire": Misfire.SKIP,
        "no_overlap": False,
        "max_attempts": 3,
        "timeout": None,
    }
    return ScheduleDefinition(**{**base, **changes})  # type: ignore[arg-type]


def decide(
    ticks: tuple, *, expected=T0, new=None, skipped=(), skipped_count=0, name="hourly"
) -> MintDecision:
    return MintDecision(
        schedule=name,
        expected_cursor=expected,
        new_cursor=new or (ticks[-1] if ticks else expected + HOUR),
        ticks=ticks,
        skipped=skipped,
        skipped_count=skipped_count,
    )


def scheduled_jobs(store, name="hourly"):
    [view] = [v for v in store.list_schedules() if v.name == name]
    return view


def test_a_new_schedule_starts_at_now_without_backfill(store):
    result = store.sync_schedules([definition()], now=T0)
    assert (result.added, result.changed, result.removed) == (("hourly",), (), ())
    [state] = store.load_schedules(["default"])
    assert (state.name, state.cursor, state.paused, state.has_live_instance) == ("hourly", T0, False, False)
    assert store.load_schedules(["other"]) == []


def test_syncing_the_same_set_again_changes_nothing(store):
    store.sync_schedules([definition()], now=T0)
    result = store.sync_schedules([definition()], now=T0 + HOUR)
    assert (result.added, result.changed, result.removed) == ((), (), ())
    assert scheduled_jobs(store).created_at == T0


def test_a_redefined_schedule_keeps_its_cursor(store):
    store.sync_schedules([definition()], now=T0)
    store.mint([decide((T0 + HOUR,))], now=T0 + HOUR)
    result = store.sync_schedules([definition(cron="30 * * * *")], now=T0 + 2 * HOUR)
    assert result.changed == ("hourly",)
    view = scheduled_jobs(store)
    assert (view.definition.cron, view.cursor) == ("30 * * * *", T0 + HOUR)


def test_a_schedule_removed_from_the_settings_stops_and_says_so_and_can_come_back(store):
    store.sync_schedules([definition(), definition("daily", cron="0 3 * * *")], now=T0)
    result = store.sync_schedules([definition()], now=T0 + HOUR)
    assert result.removed == ("daily",)
    assert [s.name for s in store.load_schedules(["default"])] == ["hourly"]
    removed = scheduled_jobs(store, "daily")
    assert removed.removed_at == T0 + HOUR and removed.next_run() is None
    assert store.mint([decide((T0 + HOUR,), name="daily")], now=T0 + HOUR) == 0
    assert store.sync_schedules([definition(), definition("daily", cron="0 3 * * *")], now=T0).changed == (
        "daily",
    )
    assert scheduled_jobs(store, "daily").removed_at is None


def test_a_mint_inserts_one_job_per_tick_due_at_its_tick_and_moves_the_cursor(store):
    store.sync_schedules([definition(max_attempts=5, timeout=timedelta(seconds=90))], now=T0)
    minted = store.mint([decide((T0 + HOUR,), skipped=(T0,), skipped_count=1)], now=T0 + HOUR)
    assert minted == 1
    [job] = claim(store, now=T0 + HOUR)
    assert (job.wire_name, job.due_at, job.scheduled_for, job.max_attempts) == (
        "tests.tick",
        T0 + HOUR,
        T0 + HOUR,
        5,
    )
    assert job.timeout == timedelta(seconds=90)
    view = scheduled_jobs(store)
    assert (view.cursor, view.last_run_at, view.skipped_count, view.recent_skips) == (
        T0 + HOUR,
        T0 + HOUR,
        1,
        (T0,),
    )


def test_a_mint_from_a_stale_cursor_changes_nothing(store):
    store.sync_schedules([definition()], now=T0)
    assert store.mint([decide((T0 + HOUR,))], now=T0 + HOUR) == 1
    assert store.mint([decide((T0 + HOUR,))], now=T0 + HOUR) == 0  # another node read the same cursor
    assert scheduled_jobs(store).skipped_count == 0
    assert len(claim(store, now=T0 + HOUR)) == 1


def test_a_tick_minted_once_is_never_minted_again_even_past_the_cursor_check(store):
    store.sync_schedules([definition()], now=T0)
    store.trigger_schedule("hourly", actor="ops", now=T0 + HOUR)  # a run for the instant T0 + 1 h
    assert store.mint([decide((T0 + HOUR,))], now=T0 + HOUR) == 0  # the same tick: left as it is
    assert scheduled_jobs(store).cursor == T0 + HOUR
    assert len(claim(store, now=T0 + HOUR)) == 1


def test_the_live_flag_follows_the_schedules_latest_run(store):
    store.sync_schedules([definition()], now=T0)
    store.mint([decide((T0 + HOUR,))], now=T0 + HOUR)
    assert store.load_schedules(["default"])[0].has_live_instance
    [job] = claim(store, now=T0 + HOUR)
    assert store.load_schedules(["default"])[0].has_live_instance
    report(store, outcome(job, OutcomeKind.SUCCEEDED), now=T0 + HOUR)
    assert not store.load_schedules(["default"])[0].has_live_instance


def test_pause_resume_and_run_now_are_audited_and_refused_for_an_unknown_schedule(store):
    store.sync_schedules([definition()], now=T0)
    assert store.pause_schedule("hourly", actor="alice", now=T0)
    assert store.load_schedules(["default"])[0].paused and scheduled_jobs(store).next_run() is None
    assert store.resume_schedule("hourly", actor="bob", now=T0)
    assert (
        store.trigger_schedule("hourly", actor="carol", now=T0 + timedelta(minutes=5))
        is TriggerResult.TRIGGERED
    )
    assert not store.pause_schedule("nope", actor="alice", now=T0)
    assert store.trigger_schedule("nope", actor="alice", now=T0) is TriggerResult.NOT_FOUND
    assert audit_rows(store) == [
        ("alice", AuditAction.PAUSE_SCHEDULE, "hourly"),
        ("bob", AuditAction.RESUME_SCHEDULE, "hourly"),
        ("carol", AuditAction.TRIGGER_SCHEDULE, "hourly"),
    ]
    [job] = claim(store, now=T0 + timedelta(minutes=5))
    assert job.scheduled_for == T0 + timedelta(minutes=5)
    assert scheduled_jobs(store).cursor == T0  # a run now does not move the cadence


def test_a_schedule_state_carries_its_cadence(store):
    store.sync_schedules(
        [definition(cron="", every=timedelta(minutes=5), misfire=Misfire.COALESCE, no_overlap=True)], now=T0
    )
    [state] = store.load_schedules(["default"])
    assert (state.cadence.every, state.misfire, state.no_overlap) == (
        timedelta(minutes=5),
        Misfire.COALESCE,
        True,
    )
    assert scheduled_jobs(store).next_run() == T0 + timedelta(minutes=5)


def test_minted_jobs_follow_the_transitions_of_any_job(store):
    store.sync_schedules([definition()], now=T0)
    store.mint([decide((T0 + HOUR,))], now=T0 + HOUR)
    [job] = claim(store, now=T0 + HOUR)
    report(store, outcome(job, OutcomeKind.SUCCEEDED), now=T0 + HOUR)
    assert store.get_job(job.id).state is State.SUCCEEDED
    assert store.get_job(job.id).schedule == "hourly"


# -- NO_OVERLAP: a run made live between the load and the mint -----------------------------------------


def planned(store, now):
    """What the Driver would decide for the one schedule, from a load made now."""
    [state] = store.load_schedules(["default"])
    decision = plan(state, now, grace=timedelta(minutes=5))
    assert decision is not None and decision.ticks == (now,), "the planner saw no live run"
    return decision


def test_a_run_now_between_the_load_and_the_mint_makes_the_tick_skipped_not_a_second_run(store):
    store.sync_schedules([definition(no_overlap=True)], now=T0)
    decision = planned(store, T0 + HOUR)
    store.trigger_schedule("hourly", actor="ops", now=T0 + HOUR - timedelta(seconds=1))  # live from now on
    assert store.mint([decision], now=T0 + HOUR) == 0
    view = scheduled_jobs(store)
    assert (view.cursor, view.skipped_count, view.recent_skips) == (T0 + HOUR, 1, (T0 + HOUR,))
    assert view.last_run_at is None  # a run now is not a run of the cadence
    assert [j.scheduled_for for j in claim(store, now=T0 + HOUR)] == [T0 + HOUR - timedelta(seconds=1)]


def test_a_requeue_of_the_last_run_between_the_load_and_the_mint_makes_the_tick_skipped(store):
    store.sync_schedules([definition(no_overlap=True, max_attempts=1)], now=T0)
    store.mint([decide((T0 + HOUR,))], now=T0 + HOUR)
    [first] = claim(store, now=T0 + HOUR)
    report(store, outcome(first, OutcomeKind.FAILED), now=T0 + HOUR)  # dead-lettered: not live
    decision = planned(store, T0 + 2 * HOUR)
    assert store.requeue(first.id, actor="ops", now=T0 + 2 * HOUR).value == "requeued"
    assert store.mint([decision], now=T0 + 2 * HOUR) == 0
    view = scheduled_jobs(store)
    assert (view.cursor, view.skipped_count, view.recent_skips) == (T0 + 2 * HOUR, 1, (T0 + 2 * HOUR,))
    assert [j.id for j in claim(store, now=T0 + 2 * HOUR)] == [first.id]


def test_without_no_overlap_a_run_made_live_before_the_mint_changes_nothing(store):
    store.sync_schedules([definition()], now=T0)
    [state] = store.load_schedules(["default"])
    decision = plan(state, T0 + HOUR, grace=timedelta(minutes=5))
    assert decision is not None
    store.trigger_schedule("hourly", actor="ops", now=T0 + HOUR - timedelta(seconds=1))
    assert store.mint([decision], now=T0 + HOUR) == 1
    assert scheduled_jobs(store).skipped_count == 0
