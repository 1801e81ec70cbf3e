"""The changelists accept only the lookups their pages offer: nobody probes payloads or tracebacks by URL."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client

from backwave_django.admin.guards import GuardedAdmin
from backwave_django.models import Job

from ..conftest import T0
from ..factories import JobFactory
from .test_jobs import DEAD, JOBS, QUARANTINED, failed_outcome
from .test_workers import pump

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-payload"
TRACEBACK = "hunter2-traceback"
WORKERS = "/admin/backwave_django/pumpstatus/"


def secret_job(state: str = Job.State.SCHEDULED) -> Job:
    terminal = {} if state == Job.State.SCHEDULED else {"terminal_at": T0}
    job = JobFactory(payload=f'{{"token": "{SECRET}"}}', state=state, **terminal)
    failed_outcome(job, detail=f"Traceback: {TRACEBACK}")
    return job


PROBES = [
    {"payload__contains": "s3cr"},
    {"payload__startswith": '{"token": "s'},
    {"payload__regex": "^.*s3"},
    {"payload__icontains": "S3CR"},
    {"payload": f'{{"token": "{SECRET}"}}'},
    {"payload__gt": "{"},
    {"outcomes__detail__contains": "hunter"},
    {"outcomes__message__contains": "boom"},
    {"lease__owner": "worker-a"},
    {"terminal_cause__contains": "x"},
]


@pytest.mark.parametrize("probe", PROBES, ids=lambda probe: next(iter(probe)))
def test_a_view_only_user_cannot_filter_jobs_by_hidden_fields(viewer: Client, probe: dict[str, str]) -> None:
    job = secret_job(Job.State.DEAD_LETTERED)
    for url in (JOBS, QUARANTINED, DEAD):
        for query in (probe, {"id": str(job.id), **probe}):
            response = viewer.get(url, query)
            assert response.status_code == 400, (url, query)
            assert SECRET not in response.content.decode() and TRACEBACK not in response.content.decode()


def test_the_allowlist_holds_for_users_who_may_see_payloads_too(operator: Client) -> None:
    secret_job()
    assert operator.get(JOBS, {"payload__contains": "s3cr"}).status_code == 400
    assert operator.get(WORKERS, {"detail__contains": "x"}).status_code == 400


def test_the_plain_lookups_the_brief_names_still_work(viewer: Client) -> None:
    job, other = secret_job(), JobFactory(queue="emails", wire_name="tests.add")
    assert [j.id for j in viewer.get(JOBS, {"id": str(job.id)}).context["cl"].result_list] == [job.id]
    assert [
        j.id for j in viewer.get(JOBS, {"state": "scheduled", "queue": "emails"}).context["cl"].result_list
    ] == [other.id]


def test_every_filter_link_a_page_offers_opens(operator: Client) -> None:
    secret_job(Job.State.QUARANTINED)
    secret_job(Job.State.DEAD_LETTERED)
    pump()
    for url in (JOBS, QUARANTINED, DEAD, WORKERS):
        changelist = operator.get(url).context["cl"]
        links = [
            choice["query_string"] for spec in changelist.filter_specs for choice in spec.choices(changelist)
        ]
        assert len(links) > 2, url
        for query_string in links:
            assert operator.get(f"{url}{query_string}").status_code == 200, (url, query_string)


HIDDEN_FIELDS = {"payload", "outcomes", "lease", "detail"}


def test_no_page_offers_a_lookup_on_a_hidden_field() -> None:
    ours = [m for model, m in admin.site._registry.items() if model._meta.app_label == "backwave_django"]
    assert len(ours) == 7
    for model_admin in ours:
        assert isinstance(model_admin, GuardedAdmin), type(model_admin)
        for lookup in model_admin.allowed_lookups:
            assert lookup.split("__")[0] not in HIDDEN_FIELDS, (type(model_admin), lookup)
