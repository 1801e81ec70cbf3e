"""Reads about queues for the operations pages: which queues exist, and how deep each one is."""

from __future__ import annotations

from . import conf
from .models import QueueSettings


def known_queues() -> list[str]:
    """The configured queues and those with a settings row, sorted: no scan of the job table."""
    names = conf.get().served_queues() | set(QueueSettings.objects.values_list("queue", flat=True))
    return sorted(names)
