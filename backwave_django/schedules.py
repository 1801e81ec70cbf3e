"""Recurring schedules between the settings and the store: what ``BACKWAVE['SCHEDULES']`` asks for, with each
job's arguments bound to its handler and encoded, and the synchronisation every worker runs when it starts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from . import codec, conf
from .registry import Registry, UnknownJob
from .store.contract import JobStore, ScheduleDefinition, ScheduleView, SyncResult


def definitions(settings: conf.Settings, registry: Registry) -> list[ScheduleDefinition]:
    """The schedules of ``settings``, ready to store. Raises what :func:`problems` reports."""
    found = []
    for schedule in settings.schedules.values():
        registration = registry.get(schedule.job)
        payload = codec.encode(registration.bind((), schedule.kwargs))
        found.append(
            ScheduleDefinition(
                name=schedule.name,
                wire_name=registration.wire_name,
                queue=schedule.queue or registration.queue,
                payload=payload,
                cron=schedule.cron,
                every=schedule.every,
                timezone=schedule.timezone,
                misfire=schedule.misfire,
                no_overlap=schedule.no_overlap,
                max_attempts=registration.max_attempts or settings.retry.max_attempts,
                timeout=registration.timeout,
            )
        )
    return found


def problems(settings: conf.Settings, registry: Registry) -> Iterator[tuple[str, str, str]]:
    """What is wrong with the schedules that only the registry can tell: (check id, message, hint)."""
    served = settings.served_queues()
    for schedule in settings.schedules.values():
        where = f"BACKWAVE['SCHEDULES'][{schedule.name!r}]"
        try:
            registration = registry.get(schedule.job)
        except UnknownJob:
            hint = "Register the job with @job in an installed app's jobs.py, or fix the wire name."
            yield ("backwave.E032", f"{where}['JOB'] is {schedule.job!r}, which no @job registers.", hint)
            continue
        try:
            codec.encode(registration.bind((), schedule.kwargs))
        except (TypeError, codec.PayloadError) as exc:
            hint = f"KWARGS must fit {registration.handler_path}{registration.signature} and be storable."
            yield ("backwave.E036", f"{where}['KWARGS'] do not fit the job: {exc}", hint)
        queue = schedule.queue or registration.queue
        if queue not in served:
            hint = f"Add {queue!r} to the QUEUES of a group in BACKWAVE['GROUPS'], or it never ticks."
            msg = f"{where} mints into queue {queue!r}, which no worker group serves."
            yield ("backwave.W003", msg, hint)


def sync(store: JobStore, settings: conf.Settings, registry: Registry, *, now: datetime) -> SyncResult:
    """Make the stored schedules match the settings (every worker does this when it starts)."""
    return store.sync_schedules(definitions(settings, registry), now=now)


def describe(view: ScheduleView) -> dict[str, Any]:
    """A stored schedule as plain values, for the command line, JSON and the admin."""
    definition = view.definition
    if view.removed_at is not None:
        status = "removed"
    elif view.paused:
        status = "paused"
    else:
        status = "active"
    return {
        "name": view.name,
        "status": status,
        "cadence": f"cron {definition.cron}" if definition.cron else f"every {_interval(definition.every)}",
        "timezone": definition.timezone,
        "misfire": str(definition.misfire),
        "no_overlap": definition.no_overlap,
        "job": definition.wire_name,
        "queue": definition.queue,
        "next_run": view.next_run(),
        "last_run": view.last_run_at,
        "skipped": view.skipped_count,
        "recent_skips": list(view.recent_skips),
        "removed_at": view.removed_at,
    }


def _interval(every: timedelta | None) -> str:
    seconds = int(every.total_seconds()) if every is not None else 0
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{every.total_seconds():g}s" if every is not None else "?"
