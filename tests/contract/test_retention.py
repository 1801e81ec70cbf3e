"""Retention in the store: finished jobs purged by rule (queues, states, finished before), oldest first, in
bounded batches, with their outcomes and audit records; a live job is never purged."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.retention import FAILED_CLASS, SUCCEEDED_CLASS, PurgeRule
from backwave_django.core.states import State
from backwave_django.store.contract import StoreError

from ..conftest import T0
from .support import enqueue, job_in_state

DAY = timedelta(days=1)


def rule(states=SUCCEEDED_CLASS, queues=("default",), before=T0 + DAY) -> PurgeRule:
    return PurgeRule(queues=queues, states=states, before=before)


def test_finished_jobs_older_than_the_cutoff_are_purged_with_their_outcomes_and_audit(store):
    old = job_in_state(store, State.SUCCEEDED, now=T0)
    cancelled = job_in_state(store, State.CANCELLED, now=T0)
    fresh = job_in_state(store, State.SUCCEEDED, now=T0 + 2 * DAY)
    assert store.purge([rule()], max_jobs=500) == 2
    assert store.get_job(old) is None and store.get_job(cancelled) is None
    assert store.list_outcomes(old) == [] and store.list_audit(str(cancelled)) == []
    assert store.get_job(fresh) is not None


def test_a_purge_keeps_to_its_states_and_its_queues(store):
    dead = job_in_state(store, State.DEAD_LETTERED, now=T0)
    elsewhere = job_in_state(store, State.SUCCEEDED, now=T0, queue="other")
    ok = job_in_state(store, State.SUCCEEDED, now=T0)
    assert store.purge([rule()], max_jobs=500) == 1
    assert store.get_job(ok) is None
    assert store.get_job(dead) is not None and store.get_job(elsewhere) is not None
    assert store.purge([rule(states=FAILED_CLASS)], max_jobs=500) == 1
    assert store.get_job(dead) is None


def test_a_purge_never_touches_a_live_job_and_refuses_a_rule_that_names_one(store):
    live = [job_in_state(store, s, now=T0) for s in (State.LEASED, State.SCHEDULED)]
    assert store.purge([rule(states=(*SUCCEEDED_CLASS,))], max_jobs=500) == 0
    with pytest.raises(StoreError, match="refused: a purge may only delete finished jobs"):
        store.purge([rule(states=(State.SCHEDULED,))], max_jobs=500)
    assert all(store.get_job(i) is not None for i in live)


def test_a_purge_takes_the_oldest_first_and_stops_at_its_batch(store):
    ids = [job_in_state(store, State.SUCCEEDED, now=T0 + timedelta(minutes=n)) for n in (3, 1, 2)]
    assert store.purge([rule()], max_jobs=2) == 2
    assert [store.get_job(i) is not None for i in ids] == [True, False, False]


def test_a_dry_run_counts_and_deletes_nothing(store):
    ids = [job_in_state(store, State.SUCCEEDED, now=T0) for _ in range(3)]
    assert store.purge([rule()], max_jobs=2, dry_run=True) == 2
    assert all(store.get_job(i) is not None for i in ids)


def test_the_oldest_finished_job_of_each_state(store):
    assert store.oldest_finished() == {}
    job_in_state(store, State.SUCCEEDED, now=T0 + DAY)
    job_in_state(store, State.SUCCEEDED, now=T0)
    job_in_state(store, State.QUARANTINED, now=T0 + DAY, queue="other")
    enqueue(store)
    assert store.oldest_finished() == {State.SUCCEEDED: T0, State.QUARANTINED: T0 + DAY}
    assert store.oldest_finished(["other"]) == {State.QUARANTINED: T0 + DAY}


def test_a_finished_job_that_a_project_model_protects_is_never_purged(db_store):
    from demo.models import NightlyReport  # a foreign key to Job with on_delete=PROTECT

    kept, gone = (job_in_state(db_store, State.SUCCEEDED, now=T0) for _ in range(2))
    NightlyReport.objects.create(job_id=kept, night=T0)
    assert db_store.purge([rule()], max_jobs=500, dry_run=True) == 1
    assert db_store.purge([rule()], max_jobs=500) == 1
    assert db_store.get_job(kept) is not None and db_store.get_job(gone) is None
    NightlyReport.objects.all().delete()
    assert db_store.purge([rule()], max_jobs=500) == 1


def test_with_a_cascading_project_relation_the_purge_uses_djangos_delete(db_store, monkeypatch):
    from backwave_django.store import retention

    monkeypatch.setattr(retention, "_cascading_relations", lambda: ["a project model with CASCADE"])
    old = job_in_state(db_store, State.SUCCEEDED, now=T0)
    fresh = job_in_state(db_store, State.SUCCEEDED, now=T0 + 2 * DAY)
    assert db_store.purge([rule()], max_jobs=500) == 1
    assert db_store.get_job(old) is None and db_store.list_outcomes(old) == []
    assert db_store.get_job(fresh) is not None
