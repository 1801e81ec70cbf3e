"""Every admin page, as a superuser and as a view-only user, with hostile values in every parameter: the
search, the filters, the ordering and the page number, ids in URL paths, the action and Queues forms.

Nothing may answer 500, nothing may show a payload or a traceback to the user who lacks ``view_job_payload``,
and no lookup on a hidden field may be answered with a page. Values go into query strings and form bodies
percent-encoded by hand, so that bytes which are not UTF-8 (a lone surrogate, an over-long form, a stray
``%``) reach Django as a browser sends them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

import pytest
from django.contrib.auth.models import Permission, User
from django.http import HttpResponse
from django.test import Client

from backwave_django.models import Job

from ..conftest import T0
from ..factories import JobFactory, LeasedJobFactory
from .conftest import VIEW
from .test_jobs import DEAD, JOBS, QUARANTINED, failed_outcome
from .test_workers import pump

pytestmark = pytest.mark.django_db

WORKERS = "/admin/backwave_django/pumpstatus/"
QUEUES = "/admin/backwave_django/queuesettings/"
OVERVIEW = "/admin/backwave_django/joboverview/"
SECRET = "s3cr3t-payload"
TRACEBACK = "hunter2-traceback"

TEXT = [
    "²",  # a digit to str.isdigit(), not to int()
    "9" * 20,  # beyond a bigint
    "9" * 5000,  # beyond int()'s digit limit
    "-1",
    "1.5",
    "",
    "a\x00b",  # PostgreSQL text cannot hold NUL
    "\x07",
    "'\"<script>alert(1)</script>",
    "x" * 5000,
    "\u202e",  # right-to-left override
]
RAW = [
    "%FF",  # not UTF-8
    "%ED%B2%80",  # a lone surrogate, UTF-8 encoded
    "%C0%AF",  # an over-long encoding of '/'
    "%00",
    "%",  # a stray percent sign
]
VALUES = [quote(value, safe="") for value in TEXT] + RAW

JOB_PARAMS = ["q", "o", "p", "all", "id", "state", "state__exact", "queue", "wire_name", "payload__contains"]
WORKER_PARAMS = ["q", "o", "p", "all", "health__exact", "group", "detail__contains"]
# Each page's parameters, one per request; the Queues page and the Overview read none: all at once.
CHANGELISTS = {
    JOBS: [[param] for param in JOB_PARAMS],
    QUARANTINED: [[param] for param in JOB_PARAMS],
    DEAD: [[param] for param in JOB_PARAMS],
    WORKERS: [[param] for param in WORKER_PARAMS],
    QUEUES: [JOB_PARAMS],
    OVERVIEW: [JOB_PARAMS],
}
FORM = "application/x-www-form-urlencoded"
HIDDEN_LOOKUP = re.compile(r"[?&](payload|detail)__")
FILTERED = {JOBS, QUARANTINED, DEAD, WORKERS}


class Sweep:
    """Requests as one user; every answer is checked, and every failure is kept to be reported at once."""

    def __init__(self, user: User, failures: list[str]) -> None:
        self.client = Client(raise_request_exception=False)
        self.client.force_login(user)
        self.sees_payloads = user.has_perm("backwave_django.view_job_payload")
        self.name = user.get_username()
        self.failures = failures

    def check(self, response: HttpResponse, what: str) -> None:
        if response.status_code >= 500:
            self.failures.append(f"{self.name}: {response.status_code} for {what}")
        content = response.content.decode("utf-8", "replace")
        if not self.sees_payloads and (SECRET in content or TRACEBACK in content):
            self.failures.append(f"{self.name}: a payload or traceback shown for {what}")

    def get(self, url: str) -> None:
        response = self.client.get(url)
        self.check(response, f"GET {url[:200]}")
        filters = url.partition("?")[0] in FILTERED  # the Queues page and the Overview read no parameter
        if filters and HIDDEN_LOOKUP.search(url) and response.status_code == 200:
            self.failures.append(f"{self.name}: a lookup on a hidden field was accepted: GET {url[:200]}")

    def post(self, url: str, body: str) -> None:
        self.check(self.client.post(url, body, content_type=FORM), f"POST {url} {body[:200]}")


Sweeps = tuple[list[Sweep], list[str]]


@pytest.fixture
def sweeps() -> Sweeps:
    job = JobFactory(payload=f'{{"token": "{SECRET}"}}', state=Job.State.DEAD_LETTERED, terminal_at=T0)
    failed_outcome(job, detail=f"Traceback: {TRACEBACK}")
    JobFactory(payload=f'{{"token": "{SECRET}"}}', state=Job.State.QUARANTINED, terminal_at=T0)
    LeasedJobFactory(payload=f'{{"token": "{SECRET}"}}')
    pump()
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    viewer = User.objects.create(username="viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__in=VIEW))
    failures: list[str] = []
    return [Sweep(root, failures), Sweep(viewer, failures)], failures


def each(sweeps: Sweeps, visit: Callable[[Sweep], None]) -> None:
    users, failures = sweeps
    for sweep in users:
        visit(sweep)
    assert not failures, "\n".join(failures[:50]) + f"\n({len(failures)} failures)"


@pytest.mark.parametrize("url", list(CHANGELISTS))
def test_every_list_parameter_survives_hostile_values(url: str, sweeps: Sweeps) -> None:
    def visit(sweep: Sweep) -> None:
        for params in CHANGELISTS[url]:
            for value in VALUES:
                sweep.get(f"{url}?" + "&".join(f"{param}={value}" for param in params))

    each(sweeps, visit)


@pytest.mark.parametrize("url", [JOBS, QUARANTINED, DEAD, WORKERS, QUEUES, OVERVIEW])
def test_every_detail_url_survives_hostile_ids(url: str, sweeps: Sweeps) -> None:
    real = [str(job.id) for job in Job.objects.all()] + ["host-a:12:default:x1", "default"]

    def visit(sweep: Sweep) -> None:
        for object_id in VALUES:
            for view in ("change/", "history/"):
                sweep.get(f"{url}{object_id}/{view}")
        for object_id in real:
            for view in ("change/", "history/", "delete/", ""):
                sweep.get(f"{url}{object_id}/{view}")

    each(sweeps, visit)


@pytest.mark.parametrize("url", [JOBS, QUARANTINED, DEAD])
def test_the_action_confirmation_pages_survive_hostile_forms(url: str, sweeps: Sweeps) -> None:
    real = str(Job.objects.order_by("id").values_list("id", flat=True).first())
    action = "cancel" if url == JOBS else "requeue"

    def visit(sweep: Sweep) -> None:
        for value in VALUES:
            sweep.post(url, f"action={action}&index=0&_selected_action={value}")
            sweep.post(url, f"action={action}&index=0&_selected_action={value}&confirmed=yes")
            sweep.post(url, f"action={value}&index=0&_selected_action={real}")
            sweep.post(url, f"action={action}&index={value}&_selected_action={real}")
            sweep.post(url, f"action={action}&index=0&select_across={value}&_selected_action={real}")
            across = f"action={action}&index=0&select_across=1&_selected_action={real}"
            sweep.post(f"{url}?queue={value}", across)

    each(sweeps, visit)


def test_the_queues_form_survives_hostile_fields(sweeps: Sweeps) -> None:
    def visit(sweep: Sweep) -> None:
        for value in VALUES:
            sweep.post(QUEUES, f"queue={value}&operation=pause")
            sweep.post(QUEUES, f"queue=emails&operation={value}")
            sweep.post(QUEUES, f"queue=emails&operation=limit&concurrency_limit={value}")

    each(sweeps, visit)
