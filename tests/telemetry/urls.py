"""A view that enqueues a job, for the request-span tests (ROOT_URLCONF points here)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import path

from .. import jobs


def signup(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"job": jobs.noop.enqueue().id})


urlpatterns = [path("signup/", signup)]
