"""The system checks of a ``BackwaveBackend`` in ``TASKS``: its OPTIONS and QUEUES, and whether anything runs
its queues (Django runs them through ``django.tasks.checks``, one backend at a time)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core import checks

from .. import conf
from ..core.names import queue_name_problem
from ..core.retry import MAX_ATTEMPTS_LIMIT
from ..registry import MAX_TIMEOUT

if TYPE_CHECKING:
    from .backend import BackwaveBackend


def _where(backend: BackwaveBackend) -> str:
    return f"TASKS[{backend.alias!r}]"


def backend_problems(backend: BackwaveBackend) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = []
    where = _where(backend)
    if not apps.is_installed("backwave_django"):
        found.append(
            checks.Error(
                f"{where} uses backwave_django.tasks.BackwaveBackend, but backwave_django is not installed.",
                hint="Add 'backwave_django' to INSTALLED_APPS and run manage.py migrate.",
                id="backwave.E071",
            )
        )
    found += _option_problems(backend, where)
    for queue in sorted(backend.queues):
        if problem := queue_name_problem(queue):
            found.append(checks.Error(f"{where}['QUEUES']: {problem}.", id="backwave.E074"))
    if not found:
        found += _unserved(backend, where)
    return found


def _option_problems(backend: BackwaveBackend, where: str) -> list[checks.CheckMessage]:
    from .backend import OPTION_KEYS

    options: Any = backend.options
    if not isinstance(options, dict):
        return [
            checks.Error(
                f"{where}['OPTIONS'] is not a dict.", hint="Write OPTIONS as a dict.", id="backwave.E072"
            )
        ]
    found: list[checks.CheckMessage] = []
    for key in options:
        if key not in OPTION_KEYS:
            hint = "Known keys: " + ", ".join(f"{k} ({rule})" for k, rule in OPTION_KEYS.items())
            found.append(
                checks.Error(f"{where}['OPTIONS'] has an unknown key {key!r}.", hint=hint, id="backwave.E072")
            )
    attempts = options.get("MAX_ATTEMPTS")
    bad = (
        isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT
    )
    if attempts is not None and bad:
        msg = (
            f"{where}['OPTIONS']['MAX_ATTEMPTS'] is {attempts!r}, not an int from 1 to {MAX_ATTEMPTS_LIMIT}."
        )
        found.append(
            checks.Error(msg, hint="Leave it out for BACKWAVE['RETRY']['MAX_ATTEMPTS'].", id="backwave.E073")
        )
    timeout = options.get("TIMEOUT")
    number = isinstance(timeout, int | float) and not isinstance(timeout, bool) and math.isfinite(timeout)
    if timeout is not None and not (number and 0 < timeout <= MAX_TIMEOUT.total_seconds()):
        msg = f"{where}['OPTIONS']['TIMEOUT'] is {timeout!r}, not seconds above 0 and at most 7 days."
        found.append(
            checks.Error(msg, hint="Leave it out for the worker group's TIMEOUT.", id="backwave.E075")
        )
    return found


def _unserved(backend: BackwaveBackend, where: str) -> list[checks.CheckMessage]:
    """A queue of QUEUES that no worker group serves: its tasks would wait for ever."""
    try:
        served = conf.get().served_queues()
    except Exception:  # BACKWAVE itself is wrong: its own checks say how
        return []
    if not backend.queues:  # any queue: each registered task's own queue is checked by backwave.W001
        return []
    return [
        checks.Warning(
            f"{where} lets tasks use the queue {queue!r}, which no group in BACKWAVE['GROUPS'] serves: its "
            "tasks would wait and never run.",
            hint=f"Add {queue!r} to the QUEUES of a group in BACKWAVE['GROUPS'], or remove it from "
            f"{where}['QUEUES'].",
            id="backwave.W071",
        )
        for queue in sorted(backend.queues - served)
    ]
