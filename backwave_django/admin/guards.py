"""The base of every backwave admin page: read-only, and strict about the lookups it accepts from the URL.

A changelist accepts only the lookups its page offers (``allowed_lookups``): its filters' parameters and a
few plain ones. Django's default would accept a lookup on any local field, so ``?payload__contains=...`` would
let a user without ``view_job_payload`` read payloads one character at a time. Any other lookup is refused
with :class:`~django.contrib.admin.exceptions.DisallowedModelAdminLookup`: a 400, logged as suspicious.
"""

from __future__ import annotations

from collections.abc import Set
from typing import ClassVar

from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.http import HttpRequest

from .readonly import ReadOnlyAdmin


class GuardedAdmin(ReadOnlyAdmin):
    #: The changelist's URL lookups: the filters' parameters and a few plain ones, never a hidden field.
    allowed_lookups: ClassVar[Set[str]] = frozenset()

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        if lookup not in self.allowed_lookups:
            offered = ", ".join(sorted(self.allowed_lookups)) or "none"
            raise DisallowedModelAdminLookup(
                f"Filtering {self.opts.verbose_name_plural} by {lookup!r} is not allowed; "
                f"the filters offered here are: {offered}"
            )
        return True
