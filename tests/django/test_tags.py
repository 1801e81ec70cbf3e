"""Tags through the public API: ``using(tags=...)`` at enqueue, ``context.add_tag`` in a handler (written with
its Attempt's outcome), and clear refusals of bad tags, with nothing enqueued."""

from __future__ import annotations

import pytest

from backwave_django import JobContext, JobDefinitionError, TagError
from backwave_django.models import Job, JobTag
from backwave_django.store import get_store
from backwave_django.testing import TestPump

from .. import jobs

pytestmark = pytest.mark.django_db


def tags_of(job: Job) -> list[str]:
    return get_store().list_tags(job.id)


def test_using_tags_stores_labels_and_keyed_tags_with_the_job():
    job = jobs.noop.using(tags=["urgent", ("tenant", "acme")]).enqueue()
    assert tags_of(job) == ["tenant:acme", "urgent"]
    assert sorted(job.tags.values_list("tag", flat=True)) == ["tenant:acme", "urgent"]


def test_using_adds_to_the_tags_of_an_earlier_using_and_each_tag_is_kept_once():
    urgent = jobs.noop.using(tags=["urgent"])
    [a, b] = urgent.using(tags=["urgent", ("tenant", "acme")]).enqueue_many([{}, {}])
    assert tags_of(a) == tags_of(b) == ["tenant:acme", "urgent"]
    assert tags_of(urgent.enqueue()) == ["urgent"]  # the earlier one is unchanged


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (["tenant:acme"], "give a (key, value) pair"),
        ([("tenant", "\x00")], "tag value"),
        (["x" * 1_000_000], "(1000000 characters)"),
        ("urgent", "tags must be a list of tags"),
        ([3], "got 3"),
    ],
)
def test_a_bad_tag_is_refused_by_using_and_nothing_is_enqueued(bad, says):
    with pytest.raises(JobDefinitionError) as refused:
        jobs.noop.using(tags=bad).enqueue()
    assert says in str(refused.value)
    assert not Job.objects.exists() and not JobTag.objects.exists()


@pytest.mark.parametrize("fail", [False, True])
def test_tags_a_handler_adds_are_written_with_its_outcome(fail):
    # One Attempt only: a retry's jittered delay may be zero, and the test pump would run it at once.
    one_attempt = jobs.tags_itself.using(tags=["given"], max_attempts=1)
    job = one_attempt.enqueue(tags=["seen", "tenant=acme", "seen"], fail=fail)

    TestPump().run_due()

    job.refresh_from_db()
    assert job.state == (Job.State.DEAD_LETTERED if fail else Job.State.SUCCEEDED)
    assert tags_of(job) == ["given", "seen", "tenant:acme"]


def test_a_bad_tag_in_a_handler_fails_its_attempt_with_a_cause_naming_it():
    job = jobs.tags_itself.using(max_attempts=1).enqueue(tags=["bad label"], fail=False)

    TestPump().run_due()

    job.refresh_from_db()
    assert job.state == Job.State.DEAD_LETTERED  # failed, like any handler's error
    assert "TagError" in job.outcomes.get().message and "'bad label'" in job.outcomes.get().message
    assert tags_of(job) == []


def test_a_context_takes_at_most_max_tags_per_job_new_tags():
    context = JobContext(job_id=1, attempt=1, wire_name="w", queue="q", max_attempts=1)
    for i in range(64):
        context.add_tag(f"t{i}")
    context.add_tag("t0")  # already there: no change
    with pytest.raises(TagError, match="at most 64 tags"):
        context.add_tag("one-more")
    assert len(context.added_tags) == 64
