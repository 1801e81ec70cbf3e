"""The operations surface: jobs, quarantined and dead-lettered jobs, queues, workers, schedules
and an overview.

Django's admin autodiscovery imports this package, which registers every page. Jobs are read-only here: no
add, change or delete. Writes are admin actions and the Queues page's controls, which go through
:mod:`backwave_django.operations` (the store's operator actions) with the acting user as the actor.
Payloads and failure details need the ``view_job_payload`` permission; each write needs its own permission.
"""

from __future__ import annotations

from django.contrib import admin

from ..models import DeadLetteredJob, Job, JobOverview, PumpStatus, QuarantinedJob, QueueSettings, Schedule
from .jobs import DeadLetteredJobAdmin, JobAdmin, QuarantinedJobAdmin
from .overview import OverviewAdmin
from .queues import QueueSettingsAdmin
from .schedules import ScheduleAdmin
from .workers import PumpStatusAdmin

admin.site.register(Job, JobAdmin)
admin.site.register(QuarantinedJob, QuarantinedJobAdmin)
admin.site.register(DeadLetteredJob, DeadLetteredJobAdmin)
admin.site.register(QueueSettings, QueueSettingsAdmin)
admin.site.register(PumpStatus, PumpStatusAdmin)
admin.site.register(Schedule, ScheduleAdmin)
admin.site.register(JobOverview, OverviewAdmin)
