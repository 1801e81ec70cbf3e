"""The Jobs search box: a job id (``42`` or ``#42``), a tag (``tag:urgent``, ``tag:tenant:acme``; ending in
``:``, every value of a key: ``tag:tenant:``) or the start of a wire name, checked before any query."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.names import wire_name_problem
from ..core.tags import stored_tag_problem, tag_key_problem
from .inputs import job_id_problem

TAG_PREFIX = "tag:"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSearch:
    """What a search term asks for: a job id, a wire-name prefix, nothing, or a problem to report."""

    job_id: int | None = None
    wire_name_prefix: str = ""
    tag: str = ""  #: one tag, in its stored form
    tag_key: str = ""  #: every tag of this key
    problem: str | None = None


def parse_job_search(text: str) -> JobSearch:
    term = text.strip().lstrip("#")
    if not term:
        return JobSearch()
    if term.startswith(TAG_PREFIX):
        return _tag_search(term[len(TAG_PREFIX) :])
    if term.isdigit():  # any script's digits: meant as an id, so it must be one
        problem = job_id_problem(term)
        return JobSearch(problem=f"the search {problem}") if problem else JobSearch(job_id=int(term))
    problem = wire_name_problem(term)  # a wire name's prefix obeys the wire-name rule too
    if problem:
        return JobSearch(problem=f"the search is not the start of a wire name: {problem}")
    return JobSearch(wire_name_prefix=term)


def _tag_search(tag: str) -> JobSearch:
    if tag.endswith(":") and tag.count(":") == 1:  # every value of one key
        problem = tag_key_problem(tag[:-1])
        return JobSearch(problem=f"the search {problem}") if problem else JobSearch(tag_key=tag[:-1])
    problem = stored_tag_problem(tag)
    return JobSearch(problem=f"the search {problem}") if problem else JobSearch(tag=tag)
