"""The Queues page: depth per state, settings, and pause / resume / limit through the operations."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from backwave_django.admin import queue_rows
from backwave_django.admin.queues import MAX_CONCURRENCY_LIMIT
from backwave_django.models import AuditRecord, Job, QueueSettings

from ..conftest import T0
from ..factories import JobFactory, LeasedJobFactory, QueueSettingsFactory

pytestmark = pytest.mark.django_db

URL = "/admin/backwave_django/queuesettings/"


def messages_of(response: object) -> list[str]:
    return [str(message) for message in response.context["messages"]]  # type: ignore[attr-defined]


def row(client: Client, queue: str) -> queue_rows.QueueRow:
    return next(r for r in client.get(URL).context["rows"] if r.queue == queue)


def test_every_queue_is_listed_with_its_depth_per_state(viewer: Client) -> None:
    JobFactory.create_batch(2, queue="adhoc")
    JobFactory(queue="adhoc", state=Job.State.SUCCEEDED, terminal_at=T0)
    LeasedJobFactory(queue="adhoc")
    found = row(viewer, "adhoc")  # has jobs but neither a settings row nor a group serving it
    assert str(found.depths["scheduled"]) == "2"
    assert str(found.depths["succeeded"]) == "1"
    assert found.leased == 1 and not found.paused and not found.configured
    assert "served by no group here" in viewer.get(URL).content.decode()


def test_configured_queues_without_jobs_are_listed(viewer: Client) -> None:
    names = [r.queue for r in viewer.get(URL).context["rows"]]
    assert {"default", "emails", "reports"} <= set(names)


def test_settings_rows_show_paused_and_limit(viewer: Client) -> None:
    QueueSettingsFactory(queue="emails", paused=True, concurrency_limit=4)
    found = row(viewer, "emails")
    assert found.paused and found.concurrency_limit == 4


def test_depths_are_bounded(monkeypatch: pytest.MonkeyPatch, viewer: Client) -> None:
    monkeypatch.setattr(queue_rows, "DEPTH_BOUND", 2)
    JobFactory.create_batch(3, queue="deep")
    assert str(row(viewer, "deep").depths["scheduled"]) == "2+"


def test_a_viewer_sees_no_controls_and_cannot_post(viewer: Client) -> None:
    content = viewer.get(URL).content.decode()
    assert 'value="Pause"' not in content
    assert viewer.post(URL, {"queue": "emails", "operation": "pause"}).status_code == 403
    assert not QueueSettings.objects.exists()


def test_pause_and_resume_go_through_the_operations_with_the_actor(operator: Client) -> None:
    assert 'value="Pause"' in operator.get(URL).content.decode()
    response = operator.post(URL, {"queue": "emails", "operation": "pause"}, follow=True)
    assert "Paused queue &#x27;emails&#x27;" in response.content.decode()
    assert QueueSettings.objects.get(queue="emails").paused
    operator.post(URL, {"queue": "emails", "operation": "resume"})
    assert not QueueSettings.objects.get(queue="emails").paused
    actions = list(AuditRecord.objects.order_by("id").values_list("actor", "action", "target"))
    assert actions == [("operator", "pause_queue", "emails"), ("operator", "resume_queue", "emails")]


def test_the_limit_is_set_and_cleared(operator: Client) -> None:
    operator.post(URL, {"queue": "reports", "operation": "limit", "concurrency_limit": "3"})
    assert QueueSettings.objects.get(queue="reports").concurrency_limit == 3
    operator.post(URL, {"queue": "reports", "operation": "limit", "concurrency_limit": ""})
    assert QueueSettings.objects.get(queue="reports").concurrency_limit is None


def test_a_bad_limit_changes_nothing_and_says_why(operator: Client) -> None:
    response = operator.post(
        URL, {"queue": "reports", "operation": "limit", "concurrency_limit": "-1"}, follow=True
    )
    assert "Nothing changed" in response.content.decode()
    assert not QueueSettings.objects.exists()


def test_the_pause_permission_alone_does_not_open_the_page(login: Callable[..., Client]) -> None:
    client = login("pause_queue")
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"queue": "emails", "operation": "pause"}).status_code == 403


def test_queue_names_are_escaped(operator: Client) -> None:
    JobFactory(queue="<script>q</script>")
    content = operator.get(URL).content.decode()
    assert "<script>q</script>" not in content and "&lt;script&gt;q&lt;/script&gt;" in content


@pytest.mark.parametrize("limit", [str(10**30), "9" * 20, str(MAX_CONCURRENCY_LIMIT + 1), "-1", "²", "1e3"])
def test_a_concurrency_limit_out_of_bounds_changes_nothing_and_says_why(operator: Client, limit: str) -> None:
    response = operator.post(
        URL, {"queue": "emails", "operation": "limit", "concurrency_limit": limit}, follow=True
    )
    assert response.status_code == 200
    [message] = messages_of(response)
    assert (
        "is not a concurrency limit: use a whole number from 0 to 1,000,000, or empty for no cap" in message
    )
    assert not QueueSettings.objects.exists()


def test_the_largest_concurrency_limit_is_accepted(operator: Client) -> None:
    operator.post(
        URL, {"queue": "emails", "operation": "limit", "concurrency_limit": str(MAX_CONCURRENCY_LIMIT)}
    )
    assert QueueSettings.objects.get(queue="emails").concurrency_limit == MAX_CONCURRENCY_LIMIT


@pytest.mark.parametrize("queue", ["bad queue!", "-leading-dash", "x" * 129, "", "a\x00b", "émails"])
def test_a_queue_name_typed_into_the_queues_form_is_checked_by_the_one_validator(
    operator: Client, queue: str
) -> None:
    for operation in ("pause", "resume", "limit"):
        data = {"queue": queue, "operation": operation, "concurrency_limit": "3"}
        response = operator.post(URL, data, follow=True)
        assert response.status_code == 200
        [message] = messages_of(response)
        assert (
            message.startswith("Nothing changed: queue name")
            and "is not valid: use 1 to 128 characters" in message
        )
    assert not QueueSettings.objects.exists()


def test_an_unknown_queue_operation_is_named_in_the_refusal(operator: Client) -> None:
    response = operator.post(URL, {"queue": "emails", "operation": "drop"}, follow=True)
    assert messages_of(response) == ["Nothing changed: the operation is one of pause, resume, limit."]
