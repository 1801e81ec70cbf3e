"""System checks: every wrong setting is an error with an id and a hint that says what to write."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import connections

from . import conf


@checks.register("backwave")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = [checks.Error(p.msg, hint=p.hint, id=p.id) for p in conf.problems()]
    if found:
        return found
    settings = conf.get()
    vendor = connections[settings.database].vendor
    if vendor not in ("postgresql", "sqlite"):
        found.append(
            checks.Error(
                f"BACKWAVE['DATABASE'] ({settings.database!r}) is a {vendor} database.",
                hint="backwave-django supports PostgreSQL and SQLite; point BACKWAVE['DATABASE'] at one.",
                id="backwave.E014",
            )
        )
    from .registry import registry

    served = settings.served_queues()
    for registration in registry.all():
        if registration.queue not in served:
            found.append(
                checks.Warning(
                    f"Job {registration.wire_name!r} ({registration.handler_path}) goes to queue "
                    f"{registration.queue!r}, which no worker group serves.",
                    hint=f"Add {registration.queue!r} to the QUEUES of a group in BACKWAVE['GROUPS'].",
                    id="backwave.W001",
                )
            )
    return found
