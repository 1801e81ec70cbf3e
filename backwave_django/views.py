"""The health endpoint: each worker group's health as JSON, from the Pumps' recorded status, for probes and
monitors. It reads what ``backwave_health`` reads (``backwave_django.health``), so the two always agree.

``GET <prefix>/health/`` answers for every configured group, ``GET <prefix>/health/<group>/`` for one.
``?probe=live`` (the default) passes a group while some Pump of it runs, if only degraded; ``?probe=ready``
only while some Pump runs and is not degraded. 200: every group asked about passes; 503: one does not, or the
database cannot be read; 404: no such group; 400: an unknown probe; 401: ``BACKWAVE['HEALTH_TOKEN']`` is set
and the request does not carry it as ``Authorization: Bearer <token>``. Nothing about jobs is shown: group
names, Pump counts by state and the age of the last heartbeat.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from . import conf
from .health import GroupReport, group_reports
from .store import get_store

logger = logging.getLogger("backwave.health")

PROBES = ("live", "ready")


def _answer(body: dict[str, Any], status: int) -> JsonResponse:
    return JsonResponse(body, status=status)


def _authorized(request: HttpRequest, token: str | None) -> bool:
    if token is None:
        return True
    given = request.headers.get("Authorization", "")
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


def _group(report: GroupReport, probe: str) -> dict[str, Any]:
    ages = [row.age_seconds for row in report.pumps if row.observed.serving]
    return {
        "status": report.status,
        "passes": report.passes(probe),
        "live": report.up,
        "ready": report.ready,
        "pumps": report.counts(),
        "last_beat_seconds": round(min(ages), 1) if ages else None,
    }


@never_cache
@require_safe
def health(request: HttpRequest, group: str | None = None) -> JsonResponse:
    settings = conf.get()
    if not _authorized(request, settings.health_token):
        response = _answer({"error": "this endpoint needs BACKWAVE['HEALTH_TOKEN'] as a Bearer token"}, 401)
        response["WWW-Authenticate"] = 'Bearer realm="backwave"'
        return response
    probe = request.GET.get("probe", "live")
    if probe not in PROBES:
        return _answer({"error": "probe must be 'live' or 'ready'"}, 400)
    if group is not None and group not in settings.groups:
        return _answer({"error": "no such worker group", "groups": sorted(settings.groups)}, 404)
    names = [group] if group is not None else list(settings.groups)
    now = timezone.now()
    try:
        reports = group_reports(get_store(settings.database), settings, names, now=now)
    except Exception:  # the database is down or unreachable: not healthy, and no details leak
        logger.exception("the health endpoint could not read the pumps' status")
        return _answer({"probe": probe, "ok": False, "error": "the job database could not be read"}, 503)
    ok = all(report.passes(probe) for report in reports)
    body = {
        "probe": probe,
        "ok": ok,
        "checked_at": now.isoformat(),
        "groups": {report.group: _group(report, probe) for report in reports},
    }
    return _answer(body, 200 if ok else 503)
