"""System checks: every wrong setting is an error with an id and a hint that says what to write."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError, connections

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
    from . import schedules
    from .registry import registry

    for check, msg, hint in schedules.problems(settings, registry):
        kind = checks.Warning if check.startswith("backwave.W") else checks.Error
        found.append(kind(msg, hint=hint, id=check))
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


@checks.register("backwave", checks.Tags.database)
def check_autovacuum(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """With ``--database`` (and at ``migrate``): warn when PostgreSQL runs without autovacuum."""
    if not conf.problems() and databases and conf.get().database in databases:
        connection = connections[conf.get().database]
        if connection.vendor == "postgresql":
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SHOW autovacuum")
                    enabled = cursor.fetchone()[0] == "on"
            except DatabaseError:
                return []
            if not enabled:
                return [
                    checks.Warning(
                        "autovacuum is off on this PostgreSQL server: finished jobs leave dead rows that "
                        "slow every claim down until a VACUUM removes them.",
                        hint="Turn autovacuum on (the default), or VACUUM the backwave_django_* tables "
                        "regularly (for example from cron).",
                        id="backwave.W002",
                    )
                ]
    return []
