"""Recurring schedules in the Core: ticks (cron in a zone, DST rules, fixed intervals), the mint planner."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from backwave_django.core.schedules import (
    MAX_RECORDED_SKIPS,
    MAX_TICKS_PER_PASS,
    Cadence,
    Misfire,
    ScheduleState,
    Walkers,
    _instant,
    confirmed,
    cron_problem,
    plan,
    zone_problem,
)

PARIS, NEW_YORK = ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")
GRACE = timedelta(minutes=1)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ticks(cadence: Cadence, after: datetime, count: int, zone: ZoneInfo = PARIS) -> list[str]:
    found, when = [], after
    for _ in range(count):
        when = cadence.next_after(when)
        found.append(when.astimezone(zone).strftime("%m-%d %H:%M:%S%z"))
    return found


# -- the library: the meaning of steps and ranges is pinned (past releases changed it) ---------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("*/20 * * * *", ["00:20", "00:40", "01:00"]),
        ("5-59/20 * * * *", ["00:05", "00:25", "00:45"]),
        ("0 */6 * * *", ["06:00", "12:00", "18:00"]),
        ("10,40 1-2 * * *", ["01:10", "01:40", "02:10"]),
    ],
)
def test_croniter_steps_and_ranges_mean_what_we_document(expression, expected):
    walker = croniter(expression, datetime(2026, 1, 1))
    assert [walker.get_next(datetime).strftime("%H:%M") for _ in expected] == expected


def test_a_restricted_day_of_month_and_weekday_fire_on_either_even_when_one_starts_with_a_star():
    # Vixie cron reads "*/10 ... 1" as "day 1, 11, 21 or 31 AND a Monday"; croniter 1.4.0 did too, for one
    # release. We document (and croniter 7.0 does) the POSIX reading: either day.
    walker = croniter("0 0 */10 * 1", datetime(2026, 1, 1))
    fired = [walker.get_next(datetime).strftime("%m-%d %a") for _ in range(5)]
    assert fired == ["01-05 Mon", "01-11 Sun", "01-12 Mon", "01-19 Mon", "01-21 Wed"]


def croniter_ticks(expression: str, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """The ticks by croniter stepping tick after tick, with our rules for gaps and repeated hours."""
    walker, found = croniter(expression, after.astimezone(zone).replace(tzinfo=None)), [after]
    while found[-1] < until:
        tick = _instant(walker.get_next(datetime), zone)
        if tick > found[-1]:
            found.append(tick)
    return found[1:]


def walked(expression: str, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    cadence, walkers, found = Cadence(cron=expression, timezone=str(zone)), Walkers(), [after]
    while found[-1] < until:
        found.append(cadence.next_after(found[-1], walkers))
    return found[1:]


#: The four DST changes of 2026 in Paris and New York (UTC), and a span of days for a longer walk.
DST_CHANGES = [
    datetime(2026, 3, 8, 7, tzinfo=UTC),
    datetime(2026, 3, 29, 1, tzinfo=UTC),
    datetime(2026, 10, 25, 1, tzinfo=UTC),
    datetime(2026, 11, 1, 6, tzinfo=UTC),
]


@pytest.mark.parametrize(
    ("expression", "days"),
    [
        ("0 * * * *", 40),
        ("*/15 * * * *", 10),
        ("30 2 * * *", 40),
        ("5,35 1-3 * * *", 40),
        ("59 23 * * *", 40),
        ("*/20 * * * * 30", 10),
        ("* * * * *", 0),  # MAX_DAILY_TICKS a day: the most a day's ticks are kept for
        ("*/30 * * * * *", 0),  # more: stepped by croniter
        ("0 3 * * 1-5", 40),  # not every day alike: stepped by croniter
    ],
)
@pytest.mark.parametrize("zone", [ZoneInfo("UTC"), PARIS, NEW_YORK])
def test_walking_a_day_s_ticks_once_gives_every_tick_croniter_gives(expression, days, zone):
    spans = [(change - timedelta(hours=3), change + timedelta(hours=3)) for change in DST_CHANGES]
    spans.append(
        (datetime(2026, 10, 10, tzinfo=UTC), datetime(2026, 10, 10, tzinfo=UTC) + timedelta(days=days))
    )
    for after, until in spans:
        assert walked(expression, zone, after, until) == croniter_ticks(expression, zone, after, until)


def test_six_fields_put_the_seconds_last():
    cadence = Cadence(cron="*/20 * * * * 30")
    assert ticks(cadence, T0, 3, zone=ZoneInfo("UTC")) == [
        "01-01 00:00:30+0000",
        "01-01 00:20:30+0000",
        "01-01 00:40:30+0000",
    ]


# -- validation ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("0 3 * * *", None),
        ("0 3 * * * 15", None),
        ("0 3 * *", "has 4 fields"),
        ("0 3 * * * * 2026", "has 7 fields"),
        ("61 * * * *", "not a valid cron expression"),
        ("0 0 30 2 *", "never fires"),
        (17, "a cron expression is a str"),
    ],
)
def test_a_cron_expression_is_five_or_six_fields_that_fire(expression, problem):
    found = cron_problem(expression)
    assert (found is None) if problem is None else (problem in found)


@pytest.mark.parametrize(
    ("name", "ok"), [("UTC", True), ("Europe/Paris", True), ("Mars/Olympus", False), ("", False), (3, False)]
)
def test_a_time_zone_is_an_iana_name(name, ok):
    assert (zone_problem(name) is None) is ok


# -- time zones ----------------------------------------------------------------------------------------


def test_a_daily_tick_in_a_spring_gap_fires_once_at_the_first_valid_instant():
    cadence = Cadence(cron="30 2 * * *", timezone="Europe/Paris")  # 02:30 does not exist on 29 March 2026
    assert ticks(cadence, datetime(2026, 3, 28, 12, tzinfo=UTC), 3) == [
        "03-29 03:00:00+0200",
        "03-30 02:30:00+0200",
        "03-31 02:30:00+0200",
    ]


def test_a_daily_tick_in_a_repeated_hour_fires_once():
    cadence = Cadence(cron="30 2 * * *", timezone="Europe/Paris")  # 02:30 happens twice on 25 October 2026
    assert ticks(cadence, datetime(2026, 10, 24, 12, tzinfo=UTC), 3) == [
        "10-25 02:30:00+0200",
        "10-26 02:30:00+0100",
        "10-27 02:30:00+0100",
    ]


def test_frequent_ticks_skip_the_missing_hour_and_do_not_repeat_the_repeated_one():
    every_half_hour = Cadence(cron="*/30 * * * *", timezone="Europe/Paris")
    assert ticks(every_half_hour, datetime(2026, 3, 28, 23, 0, tzinfo=UTC), 5) == [
        "03-29 00:30:00+0100",
        "03-29 01:00:00+0100",
        "03-29 01:30:00+0100",
        "03-29 03:00:00+0200",  # 02:00 and 02:30 do not exist: one tick at the end of the gap
        "03-29 03:30:00+0200",
    ]
    assert ticks(every_half_hour, datetime(2026, 10, 24, 23, 0, tzinfo=UTC), 5) == [
        "10-25 01:30:00+0200",
        "10-25 02:00:00+0200",
        "10-25 02:30:00+0200",
        "10-25 03:00:00+0100",  # the second 02:00 and 02:30 fire no more
        "10-25 03:30:00+0100",
    ]


def test_new_york_changes_on_other_days_and_at_its_own_hours():
    cadence = Cadence(cron="30 2 * * *", timezone="America/New_York")
    assert ticks(cadence, datetime(2026, 3, 7, 12, tzinfo=UTC), 3, NEW_YORK) == [
        "03-08 03:00:00-0400",  # 8 March 2026: 02:00 jumps to 03:00
        "03-09 02:30:00-0400",
        "03-10 02:30:00-0400",
    ]
    assert ticks(cadence, datetime(2026, 10, 31, 12, tzinfo=UTC), 3, NEW_YORK) == [
        "11-01 02:30:00-0500",  # 1 November 2026: 01:00-02:00 repeats; 02:30 is after it, once
        "11-02 02:30:00-0500",
        "11-03 02:30:00-0500",
    ]
    hourly = Cadence(cron="30 1 * * *", timezone="America/New_York")
    assert ticks(hourly, datetime(2026, 10, 31, 12, tzinfo=UTC), 2, NEW_YORK) == [
        "11-01 01:30:00-0400",  # the first of the two 01:30s only
        "11-02 01:30:00-0500",
    ]


def test_a_fixed_interval_ignores_zones_and_counts_from_the_cursor():
    cadence = Cadence(every=timedelta(minutes=90), timezone="Europe/Paris")
    start = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
    assert [cadence.next_after(start + timedelta(minutes=90) * k) - start for k in range(3)] == [
        timedelta(minutes=90),
        timedelta(minutes=180),
        timedelta(minutes=270),
    ]


def test_walkers_give_the_same_ticks_as_a_fresh_walk():
    cadence, walkers = Cadence(cron="7 */3 * * *", timezone="Europe/Paris"), Walkers()
    when = T0
    for _ in range(50):
        tick = cadence.next_after(when, walkers)
        assert tick == cadence.next_after(when)
        when = tick


def test_a_walker_asked_out_of_order_starts_again_where_it_is_asked():
    cadence, walkers = Cadence(cron="11 */5 * * *", timezone="America/New_York"), Walkers()
    for when in (T0 + timedelta(days=40), T0, T0 + timedelta(days=3, minutes=17), T0 + timedelta(days=1)):
        assert cadence.next_after(when, walkers) == croniter_tick("11 */5 * * *", "America/New_York", when)


def croniter_tick(expression: str, zone: str, after: datetime) -> datetime:
    """The next tick by a fresh croniter walk (no DST edge near these times)."""
    wall = after.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    return croniter(expression, wall).get_next(datetime).replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)


# -- the planner ---------------------------------------------------------------------------------------

HOURLY = Cadence(cron="0 * * * *")


def state(**changes: object) -> ScheduleState:
    base = {
        "name": "hourly",
        "cadence": HOURLY,
        "misfire": Misfire.SKIP,
        "no_overlap": False,
        "cursor": T0,
        "paused": False,
        "has_live_instance": False,
    }
    return ScheduleState(**{**base, **changes})  # type: ignore[arg-type]


def test_nothing_due_plans_nothing():
    assert plan(state(), T0 + timedelta(minutes=59), GRACE) is None


def test_a_fresh_tick_is_minted_and_the_cursor_moves_to_it():
    decision = plan(state(), T0 + timedelta(hours=1, seconds=5), GRACE)
    tick = T0 + timedelta(hours=1)
    assert (decision.ticks, decision.skipped_count, decision.new_cursor) == ((tick,), 0, tick)
    assert decision.expected_cursor == T0


def test_skip_mints_nothing_for_missed_ticks_and_counts_them():
    outage = T0 + timedelta(weeks=3, minutes=30)
    decision = plan(state(), outage, GRACE)
    assert decision.ticks == ()
    assert decision.skipped_count == 3 * 7 * 24
    assert decision.new_cursor == T0 + timedelta(weeks=3)
    assert len(decision.skipped) == MAX_RECORDED_SKIPS and decision.skipped[-1] == decision.new_cursor


def test_coalesce_mints_exactly_one_make_up_run_however_long_the_outage():
    for outage in (timedelta(hours=3, minutes=30), timedelta(weeks=3, minutes=30)):
        decision = plan(state(misfire=Misfire.COALESCE), T0 + outage, GRACE)
        latest = T0 + timedelta(hours=outage // timedelta(hours=1))
        assert decision.ticks == (latest,)
        assert decision.skipped_count == outage // timedelta(hours=1) - 1


def test_coalesce_mints_the_make_up_run_and_the_fresh_tick_together():
    decision = plan(state(misfire=Misfire.COALESCE), T0 + timedelta(hours=3, seconds=10), GRACE)
    assert decision.ticks == (T0 + timedelta(hours=2), T0 + timedelta(hours=3))


def test_a_backlog_longer_than_a_pass_is_worked_off_and_coalesced_only_at_its_end():
    every_second = state(cadence=Cadence(every=timedelta(seconds=1)), misfire=Misfire.COALESCE)
    decision = plan(every_second, T0 + timedelta(days=1), GRACE, limit=10_000)
    assert (decision.ticks, decision.skipped_count) == ((), 10_000)  # not the end yet: no make-up run
    cron_second = state(cadence=Cadence(cron="* * * * * *"), misfire=Misfire.COALESCE)
    decision = plan(cron_second, T0 + timedelta(hours=5), GRACE, limit=1000)
    assert (decision.ticks, decision.skipped_count) == ((), 1000)
    assert decision.new_cursor == T0 + timedelta(seconds=1000)


def passes(schedule: ScheduleState, now: datetime, limit: int) -> tuple[list[datetime], int]:
    """Pass after pass at ``now``, each from where the last left the cursor, until nothing is left: every
    tick minted, and how many were skipped."""
    minted: list[datetime] = []
    skipped, walkers = 0, Walkers()
    while (decision := plan(schedule, now, GRACE, limit, walkers)) is not None:
        minted += decision.ticks
        skipped += decision.skipped_count
        schedule = replace(schedule, cursor=decision.new_cursor)
    return minted, skipped


def test_coalesce_mints_one_make_up_run_when_the_last_pass_of_a_long_backlog_holds_only_fresh_ticks():
    # Every second, 10,030 s down: the first pass walks 10,000 ticks, the last 30, all of them fresh.
    now = T0 + timedelta(seconds=10_030)
    every_second = state(cadence=Cadence(every=timedelta(seconds=1)), misfire=Misfire.COALESCE)
    minted, skipped = passes(every_second, now, MAX_TICKS_PER_PASS)
    first_fresh = now - GRACE
    assert minted == [first_fresh - timedelta(seconds=1)] + [
        first_fresh + timedelta(seconds=n) for n in range(61)
    ]
    assert skipped == 10_030 - len(minted)


@pytest.mark.parametrize("cadence", [Cadence(every=timedelta(seconds=1)), Cadence(cron="* * * * * *")])
@pytest.mark.parametrize("outage", [1_000, 1_030, 1_059, 1_060, 1_061, 1_099, 1_100, 1_101, 1_250])
def test_where_the_passes_of_a_backlog_stop_changes_nothing_and_coalesce_mints_one_make_up_run(
    cadence, outage
):
    now = T0 + timedelta(seconds=outage)
    schedule = state(cadence=cadence, misfire=Misfire.COALESCE)
    in_passes = passes(schedule, now, limit=100)
    assert in_passes == passes(schedule, now, limit=10_000)  # one pass
    minted, skipped = in_passes
    assert [t for t in minted if now - t > GRACE] == [now - GRACE - timedelta(seconds=1)]  # one make-up run
    assert minted[1:] == [now - GRACE + timedelta(seconds=n) for n in range(61)]  # then every fresh tick
    assert skipped == outage - len(minted)


def test_skip_mints_the_fresh_ticks_of_a_long_backlog_wherever_its_passes_stop():
    now = T0 + timedelta(seconds=1_030)
    for cadence in (Cadence(every=timedelta(seconds=1)), Cadence(cron="* * * * * *")):
        minted, skipped = passes(state(cadence=cadence), now, limit=100)
        assert minted == [now - GRACE + timedelta(seconds=n) for n in range(61)]
        assert skipped == 1_030 - 61


def test_no_overlap_skips_every_tick_while_the_last_run_is_live_and_mints_at_most_one():
    busy = plan(state(no_overlap=True, has_live_instance=True), T0 + timedelta(hours=1, seconds=1), GRACE)
    assert (busy.ticks, busy.skipped_count) == ((), 1)
    free = plan(state(no_overlap=True, misfire=Misfire.COALESCE), T0 + timedelta(hours=3, seconds=1), GRACE)
    assert free.ticks == (T0 + timedelta(hours=3),)


def test_a_run_found_live_at_mint_time_turns_a_no_overlap_schedule_s_tick_into_a_skip():
    now = T0 + timedelta(hours=3, seconds=1)
    decision = plan(state(no_overlap=True), now, GRACE)  # read while no run was live: mints 03:00
    asked: list[bool] = []

    def live() -> bool:
        asked.append(True)
        return True

    found = confirmed(decision, no_overlap=True, has_live_instance=live)
    assert (found.ticks, found.skipped_count, found.new_cursor) == ((), 3, T0 + timedelta(hours=3))
    assert found.skipped == tuple(T0 + timedelta(hours=h) for h in (1, 2, 3))
    assert confirmed(decision, no_overlap=True, has_live_instance=lambda: False) == decision
    assert confirmed(decision, no_overlap=False, has_live_instance=live) == decision
    busy = plan(state(no_overlap=True, has_live_instance=True), now, GRACE)
    assert confirmed(busy, no_overlap=True, has_live_instance=live) == busy  # nothing to mint: not asked
    assert len(asked) == 1


def test_a_skip_found_at_mint_time_keeps_only_the_newest_skips():
    cadence = Cadence(every=timedelta(minutes=1))
    decision = plan(state(cadence=cadence, no_overlap=True), T0 + timedelta(minutes=40, seconds=1), GRACE)
    found = confirmed(decision, no_overlap=True, has_live_instance=lambda: True)
    assert found.skipped_count == 40 and len(found.skipped) == MAX_RECORDED_SKIPS
    assert found.skipped[-1] == T0 + timedelta(minutes=40)


def test_a_paused_schedule_skips_its_ticks():
    decision = plan(state(paused=True), T0 + timedelta(hours=2, seconds=1), GRACE)
    assert (decision.ticks, decision.skipped_count, decision.new_cursor) == ((), 2, T0 + timedelta(hours=2))


def test_a_year_of_hourly_ticks_one_pass_at_a_time_mints_each_once():
    cursor, minted, walkers = T0, 0, Walkers()
    for hour in range(1, 24 * 365 + 1):
        decision = plan(state(cursor=cursor), T0 + timedelta(hours=hour, seconds=2), GRACE, walkers=walkers)
        minted += len(decision.ticks)
        cursor = decision.new_cursor
    assert minted == 8760


def test_a_walk_that_starts_inside_the_second_of_two_repeated_hours_goes_past_it():
    quarterly = Cadence(cron="*/15 * * * *", timezone="Europe/Paris")
    second_0210 = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10+01:00, after the clocks went back
    assert ticks(quarterly, second_0210, 2) == ["10-25 03:00:00+0100", "10-25 03:15:00+0100"]


def test_a_fixed_interval_not_yet_due_plans_nothing():
    assert plan(state(cadence=Cadence(every=timedelta(hours=1))), T0 + timedelta(minutes=59), GRACE) is None
