"""Reads: when work is next due, when a lease lapses, what changes next by itself, and the views of jobs,
leases, outcomes, audit, queues and pumps: plain values, never ORM objects."""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime, timedelta

import pytest

from backwave_django.core.health import Health
from backwave_django.core.records import OutcomeKind
from backwave_django.core.states import TERMINAL_STATES, State
from backwave_django.store.contract import (
    AuditView,
    JobView,
    LeaseView,
    OutcomeView,
    PumpView,
    QueueView,
    ReportResult,
)

from ..conftest import LEASE, T0
from .support import (
    UNKNOWN_ID,
    claim,
    claim_one,
    enqueue,
    enqueue_one,
    job_in_state,
    outcome,
    report,
    snapshot,
    sweep,
)

HOUR = timedelta(hours=1)


# -- next_due ----------------------------------------------------------------------------------------------


def test_next_due_on_an_empty_store_is_none(store):
    assert store.next_due(["default"], now=T0) is None


def test_next_due_is_the_earliest_future_due_time(store):
    enqueue_one(store, due_at=T0 + 2 * HOUR)
    enqueue_one(store, due_at=T0 + HOUR)
    assert store.next_due(["default"], now=T0) == T0 + HOUR


def test_next_due_is_now_when_work_is_already_due(store):
    enqueue_one(store, due_at=T0 - HOUR)
    enqueue_one(store, due_at=T0 + HOUR)
    assert store.next_due(["default"], now=T0) == T0


def test_next_due_after_claiming_the_due_work_is_the_next_future_job(store):
    enqueue_one(store, due_at=T0)
    enqueue_one(store, due_at=T0 + HOUR)
    claim(store)
    assert store.next_due(["default"], now=T0) == T0 + HOUR


def test_next_due_looks_only_at_the_given_queues(store):
    enqueue_one(store, queue="other", due_at=T0)
    enqueue_one(store, queue="mine", due_at=T0 + HOUR)
    assert store.next_due(["mine"], now=T0) == T0 + HOUR
    assert store.next_due(["mine", "other"], now=T0) == T0
    assert store.next_due([], now=T0) is None


def test_next_due_ignores_paused_queues(store):
    enqueue_one(store, queue="paused", due_at=T0)
    enqueue_one(store, queue="open", due_at=T0 + HOUR)
    store.pause_queue("paused", actor="ops", now=T0)

    assert store.next_due(["paused"], now=T0) is None
    assert store.next_due(["paused", "open"], now=T0) == T0 + HOUR


def test_next_due_ignores_leased_and_terminal_jobs(store):
    for state in sorted(TERMINAL_STATES):
        job_in_state(store, state, now=T0 - HOUR)
    enqueue_one(store, due_at=T0)
    claim(store)
    assert store.next_due(["default"], now=T0) is None


def test_next_due_sees_a_retry_time(store):
    enqueue_one(store)
    claimed = claim_one(store)
    report(store, outcome(claimed, OutcomeKind.FAILED), now=T0)
    assert store.next_due(["default"], now=T0) == T0 + timedelta(seconds=2)


# -- next_lease_expiry -------------------------------------------------------------------------------------


def test_next_lease_expiry_is_the_first_lease_to_lapse_in_the_given_queues(store):
    enqueue(store, 2, queue="a")
    enqueue_one(store, queue="b")
    claim(store, queues=["a"], max_jobs=1, lease=timedelta(minutes=5))
    claim(store, queues=["a"], max_jobs=1, lease=timedelta(minutes=3))
    claim(store, queues=["b"], lease=timedelta(minutes=1))

    assert store.next_lease_expiry(["a"]) == T0 + timedelta(minutes=3)
    assert store.next_lease_expiry(["a", "b"]) == T0 + timedelta(minutes=1)
    assert store.next_lease_expiry(["c"]) is None
    assert store.next_lease_expiry([]) is None


def test_next_lease_expiry_includes_lapsed_leases_until_they_are_swept(store):
    enqueue_one(store)
    claim(store)
    assert store.next_lease_expiry(["default"]) == T0 + LEASE
    sweep(store, now=T0 + LEASE)
    assert store.next_lease_expiry(["default"]) is None


def test_next_lease_expiry_follows_heartbeats_and_ends_with_the_attempt(store):
    enqueue_one(store)
    claimed = claim_one(store)
    store.heartbeat(worker_id="host:1:default:a", job_ids=[claimed.id], lease_duration=HOUR, now=T0)
    assert store.next_lease_expiry(["default"]) == T0 + HOUR
    report(store, outcome(claimed, OutcomeKind.SUCCEEDED), now=T0)
    assert store.next_lease_expiry(["default"]) is None


# -- upcoming ----------------------------------------------------------------------------------------------


def test_upcoming_is_the_first_due_time_or_lease_expiry_strictly_after_the_given_instant(store):
    enqueue_one(store, due_at=T0)  # due at T0: not after T0
    claim(store)  # its lease lapses at T0 + LEASE
    enqueue_one(store, due_at=T0 + 2 * LEASE)

    assert store.upcoming(["default"], after=T0 - timedelta(seconds=1)) == T0 + LEASE
    assert store.upcoming(["default"], after=T0 + LEASE) == T0 + 2 * LEASE
    assert store.upcoming(["default"], after=T0 + 2 * LEASE) is None


def test_upcoming_looks_only_at_the_given_queues_and_skips_terminal_jobs(store):
    job_in_state(store, State.CANCELLED, due_at=T0 + HOUR)
    enqueue_one(store, queue="other", due_at=T0 + HOUR)
    assert store.upcoming(["default"], after=T0) is None
    assert store.upcoming(["default", "other"], after=T0) == T0 + HOUR
    assert store.upcoming([], after=T0) is None


# -- views: plain values -----------------------------------------------------------------------------------

PLAIN = (int, str, bool, datetime, timedelta, tuple, frozenset, type(None), enum.Enum)


def assert_plain(value: object) -> None:
    """A frozen dataclass of this contract whose fields hold only plain Python values."""
    assert dataclasses.is_dataclass(value) and not isinstance(value, type), f"{value!r} is not a value"
    assert type(value).__module__.startswith("backwave_django.store.contract"), type(value)
    for f in dataclasses.fields(value):
        field_value = getattr(value, f.name)
        assert isinstance(field_value, PLAIN), f"{type(value).__name__}.{f.name} is a {type(field_value)}"
        assert type(field_value).__module__ in ("builtins", "datetime") or isinstance(field_value, enum.Enum)


def test_reads_return_plain_frozen_values_of_the_declared_types(store):
    enqueue_one(store, timeout=timedelta(seconds=9))
    claimed = claim_one(store)
    store.cancel(claimed.id, actor="ops", now=T0)
    result = report(store, outcome(claimed, OutcomeKind.CANCELLED), now=T0)
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)
    store.record_pump(
        worker_id="host:7:default:x",
        group="default",
        queues=["default", "emails"],
        health=Health.RUNNING,
        detail="",
        started_at=T0,
        now=T0,
    )
    enqueue_one(store)
    held = claim_one(store)

    views = [
        store.get_job(claimed.id),
        store.get_lease(held.id),
        *store.list_outcomes(claimed.id),
        *store.list_audit(),
        *store.list_queues(),
        *store.list_pumps(),
    ]

    assert [type(v) for v in views] == [
        JobView,
        LeaseView,
        OutcomeView,
        AuditView,
        AuditView,
        QueueView,
        PumpView,
    ]
    for view in views:
        assert_plain(view)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(view, dataclasses.fields(view)[0].name, None)
    job_view, _, outcome_view, *_ = views
    assert type(job_view.state) is State
    assert (type(outcome_view.kind), type(outcome_view.state_after)) == (OutcomeKind, State)
    assert type(store.list_pumps()[0].health) is Health
    assert type(result) is ReportResult
    assert all(type(i) is int for i in result.applied | result.stale)


def test_reads_of_unknown_jobs_are_empty(store):
    assert store.get_job(UNKNOWN_ID) is None
    assert store.get_lease(UNKNOWN_ID) is None
    assert store.list_outcomes(UNKNOWN_ID) == []
    assert store.list_audit(str(UNKNOWN_ID)) == []


def test_a_job_has_a_lease_view_exactly_while_it_is_leased(store):
    scheduled = enqueue_one(store, due_at=T0 + HOUR)
    finished = job_in_state(store, State.SUCCEEDED)
    leased = job_in_state(store, State.LEASED)

    assert store.get_lease(scheduled.id) is None
    assert store.get_lease(finished) is None
    assert store.get_lease(leased).attempt == 1


def test_reads_change_nothing(store):
    enqueue_one(store)
    claimed = claim_one(store)
    report(store, outcome(claimed, OutcomeKind.FAILED), now=T0)
    store.pause_queue("emails", actor="ops", now=T0)
    before = snapshot(store)

    store.next_due(["default", "emails"], now=T0 + HOUR)
    store.next_lease_expiry(["default"])
    store.upcoming(["default"], after=T0)
    store.get_job(claimed.id)
    store.get_lease(claimed.id)
    store.list_outcomes(claimed.id)
    store.list_audit()
    store.list_queues()
    store.list_pumps()

    assert snapshot(store) == before


# -- audit, queues and pumps -------------------------------------------------------------------------------


def test_the_audit_lists_operator_actions_oldest_first_and_by_target(store):
    first = enqueue_one(store, due_at=T0 + HOUR)
    store.pause_queue("emails", actor="alice", now=T0)
    store.cancel(first.id, actor="bob", now=T0 + timedelta(seconds=1))

    assert [(a.actor, a.action, a.target, a.recorded_at) for a in store.list_audit()] == [
        ("alice", "pause_queue", "emails", T0),
        ("bob", "cancel", str(first.id), T0 + timedelta(seconds=1)),
    ]
    assert [a.actor for a in store.list_audit(str(first.id))] == ["bob"]
    assert [a.detail for a in store.list_audit("emails")] == ["paused=True"]


def test_list_queues_shows_every_queue_that_has_settings_by_name(store):
    assert store.list_queues() == []
    store.set_concurrency_limit("reports", 4, actor="ops", now=T0)
    store.pause_queue("emails", actor="ops", now=T0)
    store.resume_queue("emails", actor="ops", now=T0)

    assert store.list_queues() == [
        QueueView(queue="emails", paused=False, concurrency_limit=None),
        QueueView(queue="reports", paused=False, concurrency_limit=4),
    ]


def test_a_pump_records_its_health_and_is_forgotten_once_silent(store):
    def record(worker_id: str, health: Health, now: datetime, detail: str = "") -> None:
        store.record_pump(
            worker_id=worker_id,
            group="default",
            queues=["default"],
            health=health,
            detail=detail,
            started_at=T0,
            now=now,
        )

    record("host:1:default:a", Health.RUNNING, T0)
    record("host:2:default:b", Health.RUNNING, T0)
    record("host:1:default:a", Health.DEGRADED, T0 + HOUR, detail="database unreachable")

    assert store.list_pumps() == [
        PumpView(
            worker_id="host:1:default:a",
            group="default",
            host="host",
            pid=1,
            queues=("default",),
            health=Health.DEGRADED,
            detail="database unreachable",
            started_at=T0,
            last_beat_at=T0 + HOUR,
        ),
        PumpView(
            worker_id="host:2:default:b",
            group="default",
            host="host",
            pid=2,
            queues=("default",),
            health=Health.RUNNING,
            detail="",
            started_at=T0,
            last_beat_at=T0,
        ),
    ]
    assert store.forget_pumps(silent_since=T0) == 0  # silent since exactly T0 is not silent before it
    assert store.forget_pumps(silent_since=T0 + timedelta(seconds=1)) == 1
    assert [p.worker_id for p in store.list_pumps()] == ["host:1:default:a"]
    assert store.forget_pump("host:2:default:b") is False  # forgotten already
    assert store.forget_pump("host:1:default:a") is True
    assert store.list_pumps() == []
