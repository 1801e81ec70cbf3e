"""Tags in every store: given at enqueue, added with an Attempt's outcome under the fence, a set, read by
``list_tags``, refused when malformed (nothing written), and purged with their jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.records import OutcomeKind
from backwave_django.core.retention import SUCCEEDED_CLASS, PurgeRule
from backwave_django.core.states import State
from backwave_django.core.tags import MAX_TAGS_PER_JOB, normalise_all
from backwave_django.store.contract import OutcomeDetail, StoreError

from ..conftest import LEASE, T0
from .support import (
    MAX_PAYLOAD,
    OTHER_WORKER,
    claim_one,
    enqueue,
    enqueue_one,
    new_job,
    outcome,
    report,
    state_of,
    sweep,
)

LATER = T0 + timedelta(seconds=5)
TAGS = normalise_all(["urgent", ("tenant", "acme")])


def test_tags_given_at_enqueue_are_stored_with_the_job(store):
    tagged = enqueue_one(store, tags=TAGS)
    plain = enqueue_one(store)
    assert store.list_tags(tagged.id) == ["tenant:acme", "urgent"]
    assert store.list_tags(plain.id) == []
    assert store.list_tags(10**9) == []


def test_a_batch_of_tagged_and_plain_jobs_keeps_each_jobs_own_tags(store):
    jobs = [new_job(tags=(f"t{i}",) if i % 2 else ()) for i in range(6)]
    done = store.enqueue(jobs, now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert [store.list_tags(d.id) for d in done] == [[], ["t1"], [], ["t3"], [], ["t5"]]


def test_a_duplicate_by_unique_key_adds_no_tags_to_the_holder(store):
    holder = enqueue_one(store, unique_key="k", tags=("first",))
    again = enqueue_one(store, unique_key="k", tags=("second",))
    assert again.duplicate and again.id == holder.id
    assert store.list_tags(holder.id) == ["first"]


@pytest.mark.parametrize(
    "bad",
    [
        ("tenant: acme",),
        ("a b",),
        ("nul\x00",),
        ("x" * 10_000,),
        (3,),
        ["urgent"],  # not a tuple: a NewJob carries stored forms, as normalise_all gives them
        tuple(f"t{i}" for i in range(MAX_TAGS_PER_JOB + 1)),
    ],
)
def test_a_malformed_tag_refuses_the_whole_batch_and_writes_nothing(store, bad):
    with pytest.raises(StoreError, match=r"tags of 'tests\.noop'"):
        store.enqueue([new_job(), new_job(tags=bad)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    assert store.claim(worker_id="w:1", queues=["default"], max_jobs=10, lease_duration=LEASE, now=T0) == []


@pytest.mark.parametrize("kind", [OutcomeKind.SUCCEEDED, OutcomeKind.FAILED])
def test_tags_an_attempt_adds_are_written_with_its_outcome_whatever_it_is(store, kind):
    new = enqueue_one(store, tags=("urgent",))
    leased = claim_one(store, now=T0)
    detail = OutcomeDetail(tags=("urgent", "review:needed", "seen"))
    result = report(store, outcome(leased, kind, message="m"), now=LATER, details={new.id: detail})
    assert result.applied == {new.id}
    assert store.list_tags(new.id) == ["review:needed", "seen", "urgent"]  # a set: urgent once


def test_a_fenced_off_stale_attempt_adds_no_tags(store):
    new = enqueue_one(store)
    stale = claim_one(store, now=T0)
    sweep(store, now=T0 + LEASE)  # its lease lapsed: the Attempt is over
    assert state_of(store, new.id) is State.SCHEDULED
    current = claim_one(store, worker=OTHER_WORKER, now=T0 + LEASE + timedelta(minutes=5))

    result = report(
        store,
        outcome(stale, OutcomeKind.SUCCEEDED),
        now=T0 + LEASE + timedelta(minutes=5, seconds=10),
        details={new.id: OutcomeDetail(tags=("stale",))},
    )

    assert result.stale == {new.id}
    assert store.list_tags(new.id) == []
    report(
        store,
        outcome(current, OutcomeKind.SUCCEEDED),
        worker=OTHER_WORKER,
        now=T0 + LEASE + timedelta(minutes=5, seconds=20),
        details={new.id: OutcomeDetail(tags=("current",))},
    )
    assert store.list_tags(new.id) == ["current"]


def test_a_report_past_its_lease_adds_no_tags(store):
    new = enqueue_one(store)
    leased = claim_one(store, now=T0)
    result = report(
        store,
        outcome(leased, OutcomeKind.SUCCEEDED),
        now=T0 + LEASE,  # expires_at > now no longer holds
        details={new.id: OutcomeDetail(tags=("late",))},
    )
    assert result.stale == {new.id} and store.list_tags(new.id) == []


def test_malformed_tags_in_a_report_are_dropped_and_the_outcome_still_applies(store):
    new = enqueue_one(store)
    leased = claim_one(store, now=T0)
    detail = OutcomeDetail(tags=("ok", "not ok", "nul\x00", 7))  # type: ignore[arg-type]
    result = report(store, outcome(leased, OutcomeKind.SUCCEEDED), now=LATER, details={new.id: detail})
    assert result.applied == {new.id}
    assert store.list_tags(new.id) == ["ok"]


def test_tags_stay_when_a_job_is_requeued_and_go_when_it_is_purged(store):
    new = enqueue_one(store, tags=("keep",), max_attempts=1)
    leased = claim_one(store, now=T0)
    report(store, outcome(leased, OutcomeKind.FAILED, message="boom"), now=LATER)
    assert store.requeue(new.id, actor="op", now=LATER) == "requeued"
    assert store.list_tags(new.id) == ["keep"]

    again = claim_one(store, now=LATER)
    report(store, outcome(again, OutcomeKind.SUCCEEDED), now=LATER)
    [other] = enqueue(store, tags=("keep",))
    rule = PurgeRule(queues=("default",), states=SUCCEEDED_CLASS, before=LATER + timedelta(days=1))
    assert store.purge([rule], max_jobs=10) == 1
    assert store.get_job(new.id) is None and store.list_tags(new.id) == []
    assert store.list_tags(other.id) == ["keep"]  # another job's same tag is its own
