"""Odd input never reaches the database as a crash: every id, search term, filter value and form number is
checked first, and a refusal says what was wrong and what is expected."""

from __future__ import annotations

import pytest
from django.test import Client

from backwave_django.admin.inputs import MAX_JOB_ID
from backwave_django.models import Job

from ..factories import JobFactory
from .test_jobs import DEAD, JOBS, QUARANTINED, dead
from .test_workers import pump

pytestmark = pytest.mark.django_db

QUEUES = "/admin/backwave_django/queuesettings/"
WORKERS = "/admin/backwave_django/pumpstatus/"
TWENTY_DIGITS = "9" * 20
ID_RULE = f"use a whole number from 1 to {MAX_JOB_ID}, in ASCII digits"


def messages_of(response: object) -> list[str]:
    return [str(message) for message in response.context["messages"]]  # type: ignore[attr-defined]


def found(client: Client, url: str, **query: str) -> list[int]:
    response = client.get(url, query)
    assert response.status_code == 200, query
    return [job.id for job in response.context["cl"].result_list]


@pytest.mark.parametrize("term", ["²", "٣", "9" * 5000, TWENTY_DIGITS, str(MAX_JOB_ID + 1), "0"])
def test_a_search_that_looks_like_a_number_but_is_no_job_id_finds_nothing_and_says_why(
    viewer: Client, term: str
) -> None:
    JobFactory()
    for url in (JOBS, QUARANTINED, DEAD):
        response = viewer.get(url, {"q": term})
        assert response.status_code == 200
        assert list(response.context["cl"].result_list) == []
        assert any("is not a job id" in m and ID_RULE in m for m in messages_of(response)), url


def test_the_largest_job_id_is_still_searched(viewer: Client) -> None:
    job = JobFactory()
    assert found(viewer, JOBS, q=f"#{job.id}") == [job.id]
    assert found(viewer, JOBS, q=str(MAX_JOB_ID)) == []


@pytest.mark.parametrize("term", ["tests.\x07", "x" * 5000, "\x1b[31m"])
def test_a_search_no_wire_name_can_start_with_finds_nothing_and_says_why(viewer: Client, term: str) -> None:
    JobFactory()
    response = viewer.get(JOBS, {"q": term})
    assert response.status_code == 200 and list(response.context["cl"].result_list) == []
    assert any("is not the start of a wire name" in m for m in messages_of(response))


def test_a_search_with_a_nul_is_refused_by_django_before_any_query(viewer: Client) -> None:
    JobFactory()
    response = viewer.get(JOBS, {"q": "tests\x00"})
    assert response.status_code == 200 and messages_of(response) == ["Null characters are not allowed."]


@pytest.mark.parametrize("raw_id", ["%C2%B2", TWENTY_DIGITS, "9" * 5000, "0", "-1", "%00", "1.0"])
def test_a_detail_url_with_an_id_that_is_no_job_id_says_so(operator: Client, raw_id: str) -> None:
    JobFactory()
    for url in (JOBS, QUARANTINED, DEAD):
        for view in ("change/", "history/"):
            response = operator.get(f"{url}{raw_id}/{view}", follow=True)
            assert response.status_code == 200, (url, view)
            assert any("is not a job id" in m for m in messages_of(response)), (url, view)


@pytest.mark.parametrize(
    "query",
    [
        {"queue": "\x00"},
        {"queue": "a b"},
        {"wire_name": "\x00"},
        {"state__exact": "\x00"},
        {"state": "finished"},
        {"id": TWENTY_DIGITS},
        {"id": "²"},
        {"id": "9" * 5000},
    ],
    ids=repr,
)
def test_a_filter_value_the_column_cannot_hold_is_refused_with_a_message(
    viewer: Client, query: dict[str, str]
) -> None:
    JobFactory()
    for url in (JOBS, QUARANTINED, DEAD):
        response = viewer.get(url, query)
        assert response.status_code == 302 and response["Location"].endswith("?e=1"), url
        page = viewer.get(response["Location"])
        assert page.status_code == 200
        [lookup] = query
        assert any(f"The filter {lookup} was not applied" in m for m in messages_of(page)), url


@pytest.mark.parametrize(
    "query", [{"group": "\x00"}, {"health__exact": "\x00"}, {"health__exact": "asleep"}], ids=repr
)
def test_a_workers_filter_value_the_column_cannot_hold_is_refused(
    viewer: Client, query: dict[str, str]
) -> None:
    pump()
    response = viewer.get(WORKERS, query)
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


def test_a_workers_search_with_control_characters_finds_nothing(viewer: Client) -> None:
    pump()
    response = viewer.get(WORKERS, {"q": "host\x07"})
    assert response.status_code == 200 and list(response.context["cl"].result_list) == []


@pytest.mark.parametrize("raw_id", ["%00", "a%00b", "x" * 300])
def test_detail_urls_of_text_keys_refuse_what_the_key_cannot_hold(operator: Client, raw_id: str) -> None:
    pump()
    for url in (WORKERS, QUEUES):
        response = operator.get(f"{url}{raw_id}/change/", follow=True)
        assert response.status_code == 200, url
        assert any("has that id" in m for m in messages_of(response)), url


@pytest.mark.parametrize("selected", ["²", TWENTY_DIGITS, "9" * 5000, "", "a\x00b", "1.5"])
def test_an_action_on_a_selection_that_is_no_job_id_runs_nothing_and_says_why(
    operator: Client, selected: str
) -> None:
    job = dead()
    for confirmed in ({}, {"confirmed": "yes"}):
        data = {"action": "requeue", "_selected_action": [str(job.id), selected], "index": "0", **confirmed}
        response = operator.post(DEAD, data, follow=True)
        assert response.status_code == 200
        assert any("No action was run: among the selected jobs" in m for m in messages_of(response))
    job.refresh_from_db()
    assert job.state == Job.State.DEAD_LETTERED
