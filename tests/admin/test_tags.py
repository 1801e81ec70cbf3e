"""The Jobs list filters and searches by tag, the detail lists a job's tags, and a tag typed into the URL or
the search box is checked before the database sees it."""

from __future__ import annotations

import pytest
from django.test import Client

from backwave_django.models import Job, JobTag

from ..factories import JobFactory

pytestmark = pytest.mark.django_db

JOBS = "/admin/backwave_django/job/"
SCRIPT = "<script>alert(1)</script>"


def tagged(*tags: str, **fields: object) -> Job:
    job = JobFactory(**fields)
    JobTag.objects.bulk_create(JobTag(job=job, tag=tag) for tag in tags)
    return job


def listed(client: Client, **params: str) -> list[int]:
    return [job.id for job in client.get(JOBS, params).context["cl"].result_list]


def test_the_job_list_filters_by_one_tag(viewer: Client) -> None:
    acme = tagged("tenant:acme", "urgent")
    other = tagged("tenant:other", "urgent")
    tagged()
    assert listed(viewer, tag="tenant:acme") == [acme.id]
    assert listed(viewer, tag="urgent") == [other.id, acme.id]
    choices = viewer.get(JOBS).content.decode()
    assert "?tag=tenant%3Aacme" in choices and "?tag=urgent" in choices  # the filter lists the tags in use


def test_the_search_finds_a_tag_or_every_tag_of_a_key(viewer: Client) -> None:
    acme = tagged("tenant:acme", "tenant:acme-eu")  # two tags of one key: listed once
    other = tagged("tenant:other")
    tagged("urgent")
    assert listed(viewer, q="tag:tenant:acme") == [acme.id]
    assert listed(viewer, q="tag:tenant:") == [other.id, acme.id]
    assert listed(viewer, q="tag:urgent") == [Job.objects.get(tags__tag="urgent").id]


@pytest.mark.parametrize(
    "bad", ["tag:a b", "tag:tenant: acme", "tag:t:tab\there", "tag:" + "x" * 300, f"tag:{SCRIPT}"]
)
def test_a_search_for_a_malformed_tag_finds_nothing_and_says_why(viewer: Client, bad: str) -> None:
    tagged("urgent")
    response = viewer.get(JOBS, {"q": bad})
    assert list(response.context["cl"].result_list) == []
    assert "Nothing matches" in response.content.decode() and SCRIPT not in response.content.decode()


@pytest.mark.parametrize("bad", ["a b", "\x00", "x" * 300, SCRIPT])
def test_a_malformed_tag_filter_is_not_applied_and_says_why(viewer: Client, bad: str) -> None:
    job = tagged("urgent")
    response = viewer.get(JOBS, {"tag": bad}, follow=True)
    assert response.status_code == 200
    assert [j.id for j in response.context["cl"].result_list] == [job.id]
    assert "The filter tag was not applied" in response.content.decode()


@pytest.mark.parametrize("lookup", ["tags__tag", "tags__tag__startswith", "tags__job__payload__contains"])
def test_no_lookup_through_the_tags_is_offered(viewer: Client, lookup: str) -> None:
    tagged("urgent", payload='{"secret": 1}')
    assert viewer.get(JOBS, {lookup: "x"}).status_code == 400


def test_the_detail_lists_the_jobs_tags_as_links_to_the_filtered_list(viewer: Client) -> None:
    job = tagged("tenant:acme", "urgent")
    content = viewer.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "Tags (2)" in content
    assert f'href="{JOBS}?tag=tenant%3Aacme"' in content and ">urgent<" in content
    plain = JobFactory()
    assert "No tags." in viewer.get(f"{JOBS}{plain.id}/change/").content.decode()
