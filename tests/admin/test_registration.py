"""The admin is a package: Django's autodiscovery imports it, and its ``__init__`` registers every page."""

from __future__ import annotations

from django.contrib import admin

from backwave_django.admin.jobs import DeadLetteredJobAdmin, JobAdmin, QuarantinedJobAdmin
from backwave_django.admin.overview import OverviewAdmin
from backwave_django.admin.queues import QueueSettingsAdmin
from backwave_django.admin.workers import PumpStatusAdmin
from backwave_django.models import (
    DeadLetteredJob,
    Job,
    JobOverview,
    PumpStatus,
    QuarantinedJob,
    QueueSettings,
)


def test_autodiscovery_registers_every_page() -> None:
    expected = {
        Job: JobAdmin,
        QuarantinedJob: QuarantinedJobAdmin,
        DeadLetteredJob: DeadLetteredJobAdmin,
        QueueSettings: QueueSettingsAdmin,
        PumpStatus: PumpStatusAdmin,
        JobOverview: OverviewAdmin,
    }
    registered = {model: type(model_admin) for model, model_admin in admin.site._registry.items()}
    assert {model: registered.get(model) for model in expected} == expected
