"""Retention in running Pumps: maintenance purges finished jobs of its group's queues while jobs run, and a
row the database refuses to delete is logged and passed over: it never halts a Pump or holds back the rest."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from backwave_django.models import Job

from .. import jobs
from ..factories import JobFactory
from .helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RETENTION = {"RETENTION": {"SUCCEEDED": 60, "FAILED": None, "QUEUES": {"keep": {"SUCCEEDED": None}}}}


def finished(count: int, queue: str = "default", state: str = "succeeded") -> list[int]:
    old = timezone.now() - timedelta(hours=1)
    rows = [JobFactory(queue=queue, state=state, attempt=1, terminal_at=old) for _ in range(count)]
    return [row.id for row in rows]


def test_maintenance_purges_by_retention_in_its_own_queues_while_jobs_run(settings):
    finished(1200)  # more than two batches
    kept = finished(5, queue="keep") + finished(5, state="dead_lettered") + finished(5, queue="elsewhere")
    groups = {"g": group(QUEUES=["default", "keep"])}
    with running(settings, groups, more=RETENTION):
        fresh = jobs.noop.enqueue_many([{}] * 50)
        wait_until(lambda: set(Job.objects.values_list("id", flat=True)) == {*kept, *(j.id for j in fresh)})
        wait_until(lambda: Job.objects.filter(state="succeeded", queue="default").count() == 50)


@pytest.fixture
def refused_delete():
    """A database trigger that refuses to delete one job, as a foreign key of another system might."""
    (job_id,) = finished(1)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION bw_refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
                "'job % is referenced', OLD.id USING ERRCODE = '23503'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER bw_refuse BEFORE DELETE ON backwave_django_job FOR EACH ROW "
                f"WHEN (OLD.id = {job_id}) EXECUTE FUNCTION bw_refuse()"
            )
        elif connection.vendor == "mysql":
            cursor.execute(
                "CREATE TRIGGER bw_refuse BEFORE DELETE ON backwave_django_job FOR EACH ROW BEGIN "
                f"IF OLD.id = {job_id} THEN SIGNAL SQLSTATE '23000' SET MESSAGE_TEXT = 'job is referenced'; "
                "END IF; END"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER bw_refuse BEFORE DELETE ON backwave_django_job WHEN OLD.id = {job_id} "
                "BEGIN SELECT RAISE(ABORT, 'job is referenced'); END"
            )
    yield job_id
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("DROP TRIGGER bw_refuse ON backwave_django_job")
            cursor.execute("DROP FUNCTION bw_refuse()")
        else:
            cursor.execute("DROP TRIGGER bw_refuse")


def test_a_row_the_database_refuses_to_delete_is_logged_and_never_holds_back_the_rows_behind_it(
    settings, refused_delete, caplog
):
    caplog.set_level(logging.WARNING, logger="backwave")
    behind = finished(30)  # finished after the refused one: every batch would start with it
    with running(settings, {"g": group()}, more=RETENTION) as node:
        wait_until(lambda: not Job.objects.filter(id__in=behind).exists())
        fresh = jobs.noop.enqueue_many([{}] * 20)
        wait_until(lambda: Job.objects.filter(id__in=[j.id for j in fresh], state="succeeded").count() == 20)
        assert [pump.health for pump in node.pumps] == ["running"]
    assert Job.objects.filter(id=refused_delete).exists()
    refusals = [r.getMessage() for r in caplog.records if "could not purge finished job(s)" in r.getMessage()]
    assert len(refusals) == 1 and f"[{refused_delete}]" in refusals[0]  # logged once, then passed over
