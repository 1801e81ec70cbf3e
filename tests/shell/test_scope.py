"""The per-Attempt scope: clean-ups, signals, class jobs, and the database connections each Attempt used."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection

from backwave_django.models import Job
from backwave_django.signals import attempt_finished, attempt_started

from .. import jobs
from .helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_scope_clean_ups_run_when_the_attempt_ends_on_success_and_on_failure(settings):
    jobs.disposed.clear()
    with running(settings, {"g": group()}):
        ok = jobs.scoped_function.enqueue(fail=False)
        bad = jobs.scoped_function.using(max_attempts=1).enqueue(fail=True)
        wait_until(lambda: Job.objects.filter(state__in=["succeeded", "dead_lettered"]).count() == 2)
    for job in (ok, bad):
        # last registered, first released: the resource, then the callback
        assert [what for what, job_id in jobs.disposed if job_id == job.id] == ["resource", "callback"]


def test_a_class_job_gets_a_fresh_instance_per_attempt_closed_at_its_end(settings):
    jobs.disposed.clear()
    with running(settings, {"g": group()}):
        created = jobs.ScopedClass.enqueue_many([{"value": n} for n in range(5)])
        wait_until(lambda: Job.objects.filter(state="succeeded").count() == 5)
    assert sorted(job_id for what, job_id in jobs.disposed if what == "instance") == sorted(
        j.id for j in created
    )


def test_attempt_signals_fire_around_every_handler_call(settings):
    seen: list[tuple[str, int]] = []

    def started(sender, context, **kwargs):
        seen.append(("started", context.job_id))

    def finished(sender, context, **kwargs):
        seen.append(("finished", context.job_id))

    attempt_started.connect(started)
    attempt_finished.connect(finished)
    try:
        with running(settings, {"g": group()}):
            job = jobs.always_fails.using(max_attempts=1).enqueue()
            wait_until(lambda: Job.objects.get(id=job.id).state == "dead_lettered")
    finally:
        attempt_started.disconnect(started)
        attempt_finished.disconnect(finished)
    assert seen == [("started", job.id), ("finished", job.id)]


def test_a_handler_that_leaves_a_transaction_open_has_it_rolled_back(settings):
    from django.contrib.auth.models import Group

    with running(settings, {"g": group(POOL_SIZE=2)}):
        jobs.raise_mid_transaction.using(max_attempts=1).enqueue_many([{}] * 4)
        wait_until(lambda: Counter(Job.objects.values_list("state", flat=True)) == {"dead_lettered": 4})
        ok = jobs.orm_query.enqueue(n=0)  # the same worker threads still work afterwards
        wait_until(lambda: Job.objects.get(id=ok.id).state == "succeeded")
    assert not Group.objects.filter(name__startswith="left-open").exists()
    connection.close()
