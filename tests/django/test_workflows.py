"""Workflows through the public API and the test pump: ``using(depends_on=..., run_on=...)``, ``chain`` and
``group``, reading an ancestor's output, and the errors a caller can make."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from backwave_django import (
    MAX_GRAPH_JOBS,
    MAX_PARENTS,
    JobDefinitionError,
    UnknownParent,
    chain,
    group,
)
from backwave_django.core.retention import PurgeRule
from backwave_django.core.states import State
from backwave_django.models import Dependency, Job
from backwave_django.store import get_store
from backwave_django.testing import TestPump

from .. import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def states(*rows: Job) -> list[str]:
    return [Job.objects.get(id=row.id).state for row in rows]


def test_a_child_runs_after_its_parent_and_reads_its_output():
    parent = jobs.add.enqueue(a=2, b=3)
    child = jobs.reads_parent.using(depends_on=[parent]).enqueue(parent=parent.id)
    assert child.state == Job.State.AWAITING_PARENT and child.parents_remaining == 1

    TestPump().run_due()

    assert states(parent, child) == ["succeeded", "succeeded"]
    assert Job.objects.get(id=child.id).output == 5


def test_a_grandchild_reads_the_output_of_its_grandparent_through_a_chain():
    root, middle, leaf = chain(
        jobs.add.step(a=40, b=2), jobs.noop.step(), jobs.async_reads_parent.step(parent=0)
    )  # the leaf's argument is fixed below: a step's arguments are set before the ids exist
    Job.objects.filter(id=leaf.id).update(payload=f'{{"parent":{root.id}}}')

    TestPump().run_due()

    assert states(root, middle, leaf) == ["succeeded"] * 3
    assert Job.objects.get(id=leaf.id).output == 42


def test_output_of_a_purged_or_unfinished_job_says_there_is_none():
    child = jobs.reads_parent.enqueue(parent=10**9)
    TestPump().run_due()
    assert (
        Job.objects.get(id=child.id).output
        == f"no output: job {10**9} no longer exists (retention purged it) or never did: no output"
    )


def test_a_chain_of_100_runs_in_order():
    steps = chain(*[jobs.noop.step() for _ in range(100)])
    assert [j.state for j in steps[:2]] == ["scheduled", "awaiting_parent"]
    jobs.calls.clear()

    TestPump().run_due()

    assert [job_id for _, job_id, _ in jobs.calls] == [j.id for j in steps]


def test_a_diamond_with_a_group_inside_a_chain():
    top, left, right, bottom = chain(
        jobs.add.step(a=1, b=1), [jobs.add.step(a=2, b=2), jobs.add.step(a=3, b=3)], jobs.noop.step()
    )
    parents = sorted(Dependency.objects.filter(child_id=bottom.id).values_list("parent_id", flat=True))
    assert parents == [left.id, right.id]
    assert list(Dependency.objects.filter(child_id=left.id).values_list("parent_id", flat=True)) == [top.id]

    TestPump().run_due()

    assert states(top, left, right, bottom) == ["succeeded"] * 4


def test_a_fan_in_of_1000_parents():
    parents = group(*[jobs.noop.step() for _ in range(MAX_PARENTS)])
    child = jobs.noop.using(depends_on=parents).enqueue()
    assert Job.objects.get(id=child.id).parents_remaining == MAX_PARENTS

    TestPump(max_claim_batch=200, pool_size=200).run_due()

    assert Job.objects.get(id=child.id).state == "succeeded"


def test_success_vs_any_after_a_failed_parent():
    parent = jobs.always_fails.enqueue()
    strict = jobs.noop.using(depends_on=[parent]).enqueue()
    tolerant = jobs.noop.using(depends_on=[parent.id], run_on="any").enqueue()

    pump = TestPump()
    pump.run_due()
    pump.advance(
        pump.driver.config.retry.backoff_cap_delta if False else __import__("datetime").timedelta(hours=1)
    )

    assert states(parent, strict, tolerant) == ["dead_lettered", "cancelled", "succeeded"]
    assert Job.objects.get(id=strict.id).terminal_cause == f"parent {parent.id} ended dead_lettered"


def test_a_graph_is_written_whole_or_not_at_all():
    before = Job.objects.count()
    with pytest.raises(UnknownParent, match=str(10**9)):
        chain(jobs.noop.step(), jobs.noop.using(depends_on=[10**9]).step())
    assert Job.objects.count() == before


def test_a_graph_joins_the_callers_transaction():
    with transaction.atomic():
        chain(jobs.noop.step(), jobs.noop.step())
        transaction.set_rollback(True)
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"run_on": "sometimes"}, "run_on must be 'success' or 'any', got 'sometimes'"),
        ({"depends_on": "12"}, "depends_on must be a list of jobs"),
        ({"depends_on": [0]}, "each parent must be a job"),
        ({"depends_on": ["a"]}, "each parent must be a job"),
        ({"depends_on": range(1, MAX_PARENTS + 2)}, f"at most {MAX_PARENTS} parents, got {MAX_PARENTS + 1}"),
    ],
)
def test_bad_dependency_options_are_refused_with_what_to_do(options, message):
    with pytest.raises(JobDefinitionError, match=message):
        jobs.noop.using(**options)


def test_an_unknown_parent_is_refused_by_enqueue():
    with pytest.raises(UnknownParent, match="nothing was enqueued"):
        jobs.noop.using(depends_on=[10**9]).enqueue()
    assert Job.objects.count() == 0


def test_bad_links_and_oversized_graphs_are_refused():
    with pytest.raises(TypeError, match="link 1 must be a step"):
        chain(jobs.noop.step(), "oops")
    with pytest.raises(TypeError, match="link 0 holds"):
        chain([jobs.noop])
    with pytest.raises(ValueError, match=f"at most {MAX_GRAPH_JOBS} jobs"):
        group(*[jobs.noop.step()] * (MAX_GRAPH_JOBS + 1))


def test_retention_keeps_a_parent_its_waiting_child_reads():
    parent = jobs.add.enqueue(a=1, b=2)
    blocker = jobs.sleep.enqueue(seconds=0)  # another queue: the child waits on it too
    child = jobs.reads_parent.using(depends_on=[parent, blocker]).enqueue(parent=parent.id)
    TestPump(queues=["default"]).run_due()
    rule = PurgeRule(
        queues=("default",), states=(State.SUCCEEDED,), before=timezone.now() + timedelta(days=1)
    )

    assert get_store().purge([rule], max_jobs=100) == 0  # the parent is waited on
    TestPump().run_due()
    assert Job.objects.get(id=child.id).output == 3
    assert get_store().purge([rule], max_jobs=100) == 2
    assert Dependency.objects.count() == 0  # a purged job's edges go with it, at either end
    assert Job.objects.filter(id=blocker.id).exists()
