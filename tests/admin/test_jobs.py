"""The Jobs, Quarantined jobs and Dead-lettered jobs pages: lists, detail, actions and permissions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from backwave_django.models import AuditRecord, Job, Outcome
from backwave_django.store import get_store

from ..conftest import T0
from ..factories import JobFactory, LeasedJobFactory

pytestmark = pytest.mark.django_db

JOBS = "/admin/backwave_django/job/"
QUARANTINED = "/admin/backwave_django/quarantinedjob/"
DEAD = "/admin/backwave_django/deadletteredjob/"
SCRIPT = "<script>alert(1)</script>"


def quarantined(wire_name: str = "tests.noop", **fields: object) -> Job:
    cause = fields.pop("terminal_cause", f"no handler for {wire_name!r}")
    return JobFactory(
        wire_name=wire_name, state=Job.State.QUARANTINED, terminal_at=T0, terminal_cause=cause, **fields
    )


def dead(**fields: object) -> Job:
    return JobFactory(
        state=Job.State.DEAD_LETTERED, attempt=3, terminal_at=T0, terminal_cause="ValueError: boom", **fields
    )


def failed_outcome(job: Job, detail: str = "Traceback: ValueError: boom") -> Outcome:
    return Outcome.objects.create(
        job=job,
        attempt=1,
        worker="host:1:default:a",
        kind=Outcome.Kind.FAILED,
        state_after=Job.State.SCHEDULED,
        message="ValueError: boom",
        detail=detail,
        recorded_at=T0,
    )


def post_action(client: Client, url: str, action: str, jobs: list[Job], **extra: str) -> object:
    data = {"action": action, "_selected_action": [str(job.id) for job in jobs], "index": "0", **extra}
    return client.post(url, data, follow="confirmed" in extra)


def test_anonymous_users_are_sent_to_the_login_page(client: Client) -> None:
    response = client.get(JOBS)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_staff_without_the_view_permission_is_refused(login: Callable[..., Client]) -> None:
    client = login()
    assert client.get(JOBS).status_code == 403
    assert client.get(QUARANTINED).status_code == 403


def test_the_index_lists_the_three_job_pages(viewer: Client) -> None:
    content = viewer.get("/admin/").content.decode()
    for url in (JOBS, QUARANTINED, DEAD):
        assert url in content


def test_the_job_list_shows_wire_name_queue_state_and_attempts(viewer: Client) -> None:
    JobFactory(wire_name="tests.add", queue="emails", attempt=1, max_attempts=3)
    response = viewer.get(JOBS)
    assert response.status_code == 200
    content = response.content.decode()
    assert "tests.add" in content and "emails" in content and "1 / 3" in content


def test_the_job_list_filters_by_state_queue_and_wire_name(viewer: Client) -> None:
    keep = JobFactory(wire_name="tests.add", queue="emails", state=Job.State.SUCCEEDED, terminal_at=T0)
    JobFactory(wire_name="tests.noop", queue="emails", state=Job.State.SUCCEEDED, terminal_at=T0)
    JobFactory(wire_name="tests.add", queue="default")
    response = viewer.get(JOBS, {"state__exact": "succeeded", "queue": "emails", "wire_name": "tests.add"})
    assert [job.id for job in response.context["cl"].result_list] == [keep.id]


def test_the_job_list_searches_by_id_and_by_wire_name_prefix(viewer: Client) -> None:
    first, second = JobFactory(wire_name="tests.add"), JobFactory(wire_name="tests.noop")
    assert [j.id for j in viewer.get(JOBS, {"q": str(second.id)}).context["cl"].result_list] == [second.id]
    assert [j.id for j in viewer.get(JOBS, {"q": "tests.ad"}).context["cl"].result_list] == [first.id]


def test_jobs_cannot_be_added_changed_or_deleted(operator: Client) -> None:
    job = JobFactory()
    assert operator.get(f"{JOBS}add/").status_code == 403
    assert operator.get(f"{JOBS}{job.id}/delete/").status_code == 403
    response = operator.post(f"{JOBS}{job.id}/change/", {"wire_name": "x", "state": "succeeded"})
    assert response.status_code == 403
    job.refresh_from_db()
    assert (job.wire_name, job.state) == ("tests.noop", Job.State.SCHEDULED)


def test_the_detail_shows_payload_lease_outcomes_and_operator_actions(operator: Client) -> None:
    job = LeasedJobFactory(payload='{"a": 1}')
    failed_outcome(job)
    AuditRecord.objects.create(actor="alice", action="cancel", target=str(job.id), recorded_at=T0)
    content = operator.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "{&quot;a&quot;: 1}" in content
    assert "worker-a" in content  # the lease holder
    assert "Traceback: ValueError: boom" in content and "host:1:default:a" in content
    assert "alice" in content


def test_a_view_only_user_sees_neither_payload_nor_traceback(viewer: Client) -> None:
    job = JobFactory(payload='{"secret": "s3cr3t"}')
    failed_outcome(job, detail="Traceback: password=hunter2")
    content = viewer.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "s3cr3t" not in content and "hunter2" not in content
    assert "hidden: needs the view_job_payload permission" in content
    assert "host:1:default:a" in content and "ValueError: boom" in content  # worker, short reason


def test_payloads_and_tracebacks_are_escaped(operator: Client) -> None:
    job = quarantined(wire_name=f"x{SCRIPT}", payload=f'{{"s": "{SCRIPT}"}}', terminal_cause=SCRIPT)
    failed_outcome(job, detail=SCRIPT)
    for url in (f"{JOBS}{job.id}/change/", QUARANTINED, JOBS):
        content = operator.get(url).content.decode()
        assert SCRIPT not in content, url
        assert "&lt;script&gt;" in content, url


def test_a_view_only_user_gets_no_actions(viewer: Client) -> None:
    quarantined()
    for url in (JOBS, QUARANTINED, DEAD):
        response = viewer.get(url)
        assert response.context["action_form"] is None, url


def test_the_operator_sees_requeue_and_cancel(operator: Client) -> None:
    dead()
    choices = dict(operator.get(DEAD).context["action_form"].fields["action"].choices)
    assert {"requeue", "cancel"} <= set(choices)


def test_the_quarantine_list_says_why(viewer: Client) -> None:
    quarantined("tests.gone", terminal_cause="no handler for 'tests.gone'")
    content = viewer.get(QUARANTINED).content.decode()
    assert "no handler for &#x27;tests.gone&#x27;" in content


def test_the_dead_letter_list_shows_the_last_failure_and_attempts(viewer: Client) -> None:
    dead()
    assert "ValueError: boom after 3 attempt(s)" in viewer.get(DEAD).content.decode()


def test_each_proxy_lists_only_its_state(viewer: Client) -> None:
    q, d = quarantined(), dead()
    JobFactory()
    assert [j.id for j in viewer.get(QUARANTINED).context["cl"].result_list] == [q.id]
    assert [j.id for j in viewer.get(DEAD).context["cl"].result_list] == [d.id]


def test_requeue_asks_for_confirmation_first(operator: Client) -> None:
    job = dead()
    response = post_action(operator, DEAD, "requeue", [job])
    assert response.status_code == 200
    assert "Are you sure you want to requeue" in response.content.decode()
    job.refresh_from_db()
    assert job.state == Job.State.DEAD_LETTERED


def test_requeue_confirmed_changes_the_jobs_and_records_the_user(operator: Client) -> None:
    jobs = [dead(), dead()]
    response = post_action(operator, DEAD, "requeue", jobs, confirmed="yes")
    assert "Requeued 2 jobs." in response.content.decode()
    for job in jobs:
        job.refresh_from_db()
        assert (job.state, job.attempt) == (Job.State.SCHEDULED, 0)
    actors = set(AuditRecord.objects.filter(action="requeue").values_list("actor", flat=True))
    assert actors == {"operator"}


def test_requeue_of_a_quarantined_job_without_a_handler_is_skipped_with_the_reason(operator: Client) -> None:
    known, unknown = quarantined("tests.noop"), quarantined("tests.nobody-handles-this")
    response = post_action(operator, QUARANTINED, "requeue", [known, unknown], confirmed="yes")
    content = response.content.decode()
    assert "Requeued 1 job." in content
    reason = "no handler is registered for wire name &#x27;tests.nobody-handles-this&#x27; in this deployment"
    assert f"Skipped 1: {reason} (1)." in content
    known.refresh_from_db(), unknown.refresh_from_db()
    assert (known.state, unknown.state) == (Job.State.SCHEDULED, Job.State.QUARANTINED)


def test_requeue_across_every_matching_row(operator: Client) -> None:
    jobs = [dead(), dead(), dead()]
    response = post_action(operator, DEAD, "requeue", jobs[:1], select_across="1", confirmed="yes")
    assert "Requeued 3 jobs." in response.content.decode()


def test_a_user_without_the_requeue_permission_cannot_requeue_by_post(login: Callable[..., Client]) -> None:
    client = login("view_job", "view_deadletteredjob", "cancel_job")
    job = dead()
    response = post_action(client, DEAD, "requeue", [job], confirmed="yes")
    assert response.status_code in (200, 302)
    job.refresh_from_db()
    assert job.state == Job.State.DEAD_LETTERED
    assert not AuditRecord.objects.exists()


def test_a_user_without_the_cancel_permission_cannot_cancel_by_post(login: Callable[..., Client]) -> None:
    client = login("view_job", "requeue_job")
    job = JobFactory()
    post_action(client, JOBS, "cancel", [job], confirmed="yes")
    job.refresh_from_db()
    assert job.state == Job.State.SCHEDULED


def test_cancel_reports_pending_cancelled_running_asked_and_finished_skipped(operator: Client) -> None:
    pending, running, finished = JobFactory(), LeasedJobFactory(), dead()
    response = post_action(operator, JOBS, "cancel", [pending, running, finished], confirmed="yes")
    content = response.content.decode()
    assert "Cancelled 2 jobs." in content
    assert "Skipped 1: already finished (dead_lettered) (1)." in content
    pending.refresh_from_db(), running.refresh_from_db()
    assert pending.state == Job.State.CANCELLED and running.cancel_requested


def test_requeue_goes_through_the_store(operator: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, str]] = []
    store_type = type(get_store())
    real = store_type.requeue

    def spy(self: object, job_id: int, *, actor: str, now: object) -> object:
        calls.append((job_id, actor))
        return real(self, job_id, actor=actor, now=now)  # type: ignore[arg-type]

    monkeypatch.setattr(store_type, "requeue", spy)
    job = dead()
    post_action(operator, DEAD, "requeue", [job], confirmed="yes")
    assert calls == [(job.id, "operator")]


def test_the_quarantine_filter_lists_wire_names_that_have_no_handler(viewer: Client) -> None:
    quarantined("tests.retired-long-ago")
    content = viewer.get(QUARANTINED).content.decode()
    assert "?wire_name=tests.retired-long-ago" in content


def test_filter_counts_are_never_offered(viewer: Client) -> None:
    JobFactory()
    for url in (JOBS, QUARANTINED, DEAD):
        assert "_facets" not in viewer.get(url).content.decode(), url
        assert viewer.get(url, {"_facets": "True"}).status_code == 200


def test_the_proxy_pages_open_the_same_read_only_detail(operator: Client) -> None:
    job = quarantined(payload='{"k": "v"}')
    failed_outcome(job)
    for url in (f"{QUARANTINED}{job.id}/change/", f"{DEAD}{dead().id}/change/"):
        response = operator.get(url)
        assert response.status_code == 200, url
        assert "Attempts (" in response.content.decode()
    assert "Traceback: ValueError: boom" in operator.get(f"{QUARANTINED}{job.id}/change/").content.decode()


def test_cancel_asks_for_confirmation_first(operator: Client) -> None:
    job = JobFactory()
    response = post_action(operator, JOBS, "cancel", [job])
    assert "Are you sure you want to cancel" in response.content.decode()
    job.refresh_from_db()
    assert job.state == Job.State.SCHEDULED


def succeeded_with_output() -> Job:
    job = JobFactory(
        state=Job.State.SUCCEEDED, priority=7, unique_key="invoice-42", output_json='{"total":"12.50"}'
    )
    Outcome.objects.create(
        job=job, attempt=1, worker="w", kind=Outcome.Kind.FAILED, state_after=Job.State.SCHEDULED,
        message="KeyError: x", error_type="builtins.KeyError", started_at=T0, recorded_at=T0,
    )  # fmt: skip
    return job


def test_the_detail_shows_priority_unique_key_output_and_each_attempts_exception(operator: Client) -> None:
    job = succeeded_with_output()
    seen = operator.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "invoice-42" in seen and "builtins.KeyError" in seen
    assert "{&quot;total&quot;:&quot;12.50&quot;}" in seen


def test_a_view_only_user_sees_the_unique_key_but_not_the_output(viewer: Client) -> None:
    job = succeeded_with_output()
    hidden = viewer.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "12.50" not in hidden and "invoice-42" in hidden and "builtins.KeyError" in hidden


def test_requeue_of_a_job_whose_unique_key_is_taken_is_skipped_with_the_reason(operator: Client) -> None:
    stuck = dead(unique_key="k")
    JobFactory(unique_key="k")  # an unfinished job of the same wire name holds the key now
    response = post_action(operator, DEAD, "requeue", [stuck], confirmed="yes")
    assert "holds its unique key (1)" in response.content.decode()  # type: ignore[attr-defined]
    stuck.refresh_from_db()
    assert stuck.state == Job.State.DEAD_LETTERED


def test_the_detail_shows_parents_and_children_with_their_states_as_links(viewer: Client) -> None:
    from .. import jobs

    parent = jobs.noop.enqueue()
    child = jobs.noop.using(depends_on=[parent]).enqueue()

    page = viewer.get(f"{JOBS}{parent.id}/change/").content.decode()
    assert (
        f'<a href="{JOBS}{child.id}/change/">#{child.id}</a></td><td>awaiting_parent</td><td>open</td>'
        in page
    )
    page = viewer.get(f"{JOBS}{child.id}/change/").content.decode()
    assert f'<a href="{JOBS}{parent.id}/change/">#{parent.id}</a></td><td>scheduled</td><td>open</td>' in page
    assert "No parents and no children." in viewer.get(f"{JOBS}{JobFactory().id}/change/").content.decode()


def test_the_jobs_list_filters_the_jobs_waiting_on_a_parent(viewer: Client) -> None:
    from .. import jobs

    parent = jobs.noop.enqueue()
    child = jobs.noop.using(depends_on=[parent]).enqueue()

    listed = viewer.get(f"{JOBS}?waiting=yes").context["cl"].result_list
    assert [job.id for job in listed] == [child.id]
    assert viewer.get(f"{JOBS}?waiting=maybe").status_code == 302  # refused, with a message
