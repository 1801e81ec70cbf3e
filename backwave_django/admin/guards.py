"""The base of every backwave admin page: read-only, and strict about what it accepts from the URL.

A changelist accepts only the lookups its page offers (``allowed_lookups``): its filters' parameters and a
few plain ones. Django's default would accept a lookup on any local field, so ``?payload__contains=...`` would
let a user without ``view_job_payload`` read payloads one character at a time. Any other lookup is refused
with :class:`~django.contrib.admin.exceptions.DisallowedModelAdminLookup`: a 400, logged as suspicious.

Each offered lookup checks its value before the database sees it. A value the column cannot hold (a NUL, a
20-digit id, a state that does not exist) sends the user back to the unfiltered list with a message saying
what was wrong. An id in a detail URL that cannot be a key is a "does not exist", never a database error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.options import IncorrectLookupParameters
from django.http import HttpRequest

from .inputs import tell_once, text_problem
from .readonly import ReadOnlyAdmin

#: Why a value typed by a user is refused, or None when it is fine.
Check = Callable[[str], str | None]

MAX_OBJECT_ID_LENGTH = 255  # the longest text primary key among the models (PumpStatus.worker_id)
MAX_SEARCH_LENGTH = 255  # the longest text column a search box looks in (worker ids, hosts)


class GuardedAdmin(ReadOnlyAdmin):
    #: The changelist's URL lookups (the filters' parameters and a few plain ones), each with its value's
    #: check. Never a hidden field.
    allowed_lookups: ClassVar[Mapping[str, Check]] = {}

    def object_id_problem(self, object_id: str) -> str | None:
        """Why ``object_id`` (from a detail URL) cannot be this model's key, or None."""
        return text_problem(object_id, what="id", max_length=MAX_OBJECT_ID_LENGTH)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        check = self.allowed_lookups.get(lookup)
        if check is None:
            offered = ", ".join(sorted(self.allowed_lookups)) or "none"
            raise DisallowedModelAdminLookup(
                f"Filtering {self.opts.verbose_name_plural} by {lookup!r} is not allowed; "
                f"the filters offered here are: {offered}"
            )
        problem = check(value)
        if problem:
            tell_once(request, f"The filter {lookup} was not applied: {problem}.")
            raise IncorrectLookupParameters(problem)  # the changelist redirects to itself, unfiltered
        return True

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        """A search term its columns cannot hold (a NUL, too long) finds nothing, with a message."""
        term = search_term.strip()
        problem = text_problem(term, what="the search", max_length=MAX_SEARCH_LENGTH) if term else None
        if problem:
            tell_once(request, f"Nothing matches: {problem}.")
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        problem = self.object_id_problem(object_id)
        if problem:
            tell_once(request, f"No {self.opts.verbose_name} has that id: {problem}.")
            return None  # the view answers as for a missing row
        return super().get_object(request, object_id, from_field)
