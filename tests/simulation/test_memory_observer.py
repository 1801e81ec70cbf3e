"""MemoryStore's ``observe`` hook: every change to a job, with its state before and after, in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backwave_django.core.records import OutcomeKind, OutcomeReport
from backwave_django.core.retention import PurgeRule
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.schedules import MintDecision, Misfire
from backwave_django.core.states import State
from backwave_django.store.contract import NewJob, ScheduleDefinition
from backwave_django.store.memory import JobChange, MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def observed_store() -> tuple[MemoryStore, list[JobChange]]:
    seen: list[JobChange] = []
    return MemoryStore(observe=seen.append), seen


def enqueue(store: MemoryStore, max_attempts: int = 3) -> int:
    new = NewJob(wire_name="w", payload="{}", queue="default", due_at=T0, max_attempts=max_attempts)
    return store.enqueue([new], now=T0, max_payload_bytes=1000)[0].id


def claim(store: MemoryStore, now: datetime = T0) -> None:
    store.claim(worker_id="h:1:g:a", queues=["default"], max_jobs=5, lease_duration=LEASE, now=now)


def test_an_enqueue_is_observed_as_a_job_born_scheduled():
    store, seen = observed_store()
    job_id = enqueue(store)
    [change] = seen
    assert (change.operation, change.before, change.after.id, change.after.state) == (
        "enqueue", None, job_id, State.SCHEDULED,
    )  # fmt: skip


def test_a_claim_is_observed_with_the_lease_it_took():
    store, seen = observed_store()
    enqueue(store)
    claim(store)
    change = seen[-1]
    assert change.operation == "claim"
    assert change.before is not None and change.before.state is State.SCHEDULED
    assert (change.after.state, change.after.attempt) == (State.LEASED, 1)
    assert change.lease_after == store.get_lease(change.after.id)


def test_a_report_is_observed_with_the_lease_it_ended_and_the_outcome_it_wrote():
    store, seen = observed_store()
    job_id = enqueue(store)
    claim(store)
    lease = store.get_lease(job_id)
    report = OutcomeReport(job_id=job_id, attempt=1, kind=OutcomeKind.SUCCEEDED, max_attempts=3)
    store.report(worker_id="h:1:g:a", reports=[report], retry=RetryPolicy(), now=T0)
    change = seen[-1]
    assert (change.operation, change.after.state, change.lease_before) == ("report", State.SUCCEEDED, lease)
    assert change.outcome == store.list_outcomes(job_id)[-1]


def test_a_fenced_off_report_changes_nothing_and_is_not_observed():
    store, seen = observed_store()
    job_id = enqueue(store)
    claim(store)
    report = OutcomeReport(job_id=job_id, attempt=2, kind=OutcomeKind.SUCCEEDED, max_attempts=3)
    before = len(seen)
    store.report(worker_id="h:1:g:a", reports=[report], retry=RetryPolicy(), now=T0)
    assert len(seen) == before


def test_an_expiry_a_cancel_and_a_requeue_are_each_observed():
    store, seen = observed_store()
    job_id = enqueue(store, max_attempts=1)
    claim(store)
    store.expire_leases(queues=["default"], max_jobs=5, retry=RetryPolicy(), now=T0 + LEASE)
    store.requeue(job_id, actor="op", now=T0 + LEASE)
    store.cancel(job_id, actor="op", now=T0 + LEASE)
    moves = [(c.operation, c.before.state if c.before else None, c.after.state) for c in seen[2:]]
    assert moves == [
        ("expire", State.LEASED, State.DEAD_LETTERED),
        ("requeue", State.DEAD_LETTERED, State.SCHEDULED),
        ("cancel", State.SCHEDULED, State.CANCELLED),
    ]


def test_without_an_observer_nothing_is_built():
    store = MemoryStore()
    enqueue(store)
    claim(store)
    assert store.observe is None and store.all_leases()


def test_a_mint_a_run_now_and_a_purge_are_each_observed_under_their_own_name():
    store, seen = observed_store()
    every = timedelta(seconds=10)
    definition = ScheduleDefinition(
        name="tick", wire_name="w", queue="default", payload="{}", cron="", every=every, timezone="UTC",
        misfire=Misfire.SKIP, no_overlap=False, max_attempts=1, timeout=None,
    )  # fmt: skip
    store.sync_schedules([definition], now=T0)
    tick = T0 + every
    decision = MintDecision(
        schedule="tick", expected_cursor=T0, new_cursor=tick, ticks=(tick,), skipped=(), skipped_count=0
    )
    store.mint([decision], now=tick)
    store.trigger_schedule("tick", actor="op", now=tick + every)
    minted, triggered = seen[-2].after, seen[-1].after
    assert [c.operation for c in seen] == ["mint", "trigger"]
    assert (minted.schedule, minted.scheduled_for) == ("tick", tick)
    assert (triggered.schedule, triggered.scheduled_for) == ("tick", tick + every)
    store.cancel(minted.id, actor="op", now=tick)
    rule = PurgeRule(queues=("default",), states=(State.CANCELLED,), before=tick + every)
    assert store.purge([rule], max_jobs=10) == 1
    purge = seen[-1]
    assert (purge.operation, purge.before.id, purge.after) == ("purge", minted.id, None)
