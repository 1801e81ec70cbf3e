"""URLs to include in a project's URLconf: ``path("backwave/", include("backwave_django.urls"))``."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "backwave"

urlpatterns = [
    path("health/", views.health, name="health"),
    path("health/<str:group>/", views.health, name="group-health"),
]
