"""factory-boy factories for the models, for tests that need rows in a given state."""

from __future__ import annotations

import factory

from backwave_django.models import Job, Lease, QueueSettings, Schedule

from .conftest import LEASE, T0


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    wire_name = "tests.noop"
    queue = "default"
    payload = "{}"
    state = Job.State.SCHEDULED
    attempt = 0
    max_attempts = 3
    due_at = T0
    created_at = T0


class LeasedJobFactory(JobFactory):
    """A job already claimed by ``lease__owner`` for attempt 1, with a live lease."""

    class Meta:
        skip_postgeneration_save = True

    state = Job.State.LEASED
    attempt = 1
    lease = factory.RelatedFactory(
        "tests.factories.LeaseFactory",
        factory_related_name="job",
        attempt=1,
        queue=factory.SelfAttribute("..queue"),
    )


class LeaseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Lease

    job = factory.SubFactory(JobFactory, state=Job.State.LEASED, attempt=1)
    queue = factory.SelfAttribute("job.queue")
    owner = "worker-a"
    attempt = 1
    claimed_at = T0
    expires_at = T0 + LEASE


class QueueSettingsFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QueueSettings

    queue = "default"
    paused = False
    concurrency_limit = None
    updated_at = T0


class ScheduleFactory(factory.django.DjangoModelFactory):
    """A stored hourly schedule of ``tests.tick`` whose cursor stands at T0."""

    class Meta:
        model = Schedule

    name = factory.Sequence(lambda n: f"schedule-{n}")
    wire_name = "tests.tick"
    queue = "default"
    payload = "{}"
    cron = "0 * * * *"
    cursor = T0
    created_at = T0
    updated_at = T0
