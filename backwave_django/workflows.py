"""Workflows: whole graphs of jobs enqueued in one transaction.

A :class:`Step` is a job with its arguments, not enqueued yet (``fn.step(...)``, or
``fn.using(...).step(...)`` with per-call options). :func:`chain` runs steps one after the other, each
waiting on the one before; :func:`group` enqueues steps side by side (a fan-out). A fan-in is a child that
depends on a group's jobs: ``report.using(depends_on=group(...)).enqueue()``, or a group inside a chain::

    chain(fetch.step(url), [resize.step(1), resize.step(2)], publish.step())

Each returns the jobs it stored, in the order of the steps. Either the whole graph is written or nothing
is: the calls run in one transaction of ``BACKWAVE['DATABASE']`` (joining the caller's, if one is open).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .core.dependencies import MAX_GRAPH_JOBS

if TYPE_CHECKING:
    from .models import Job
    from .registry import JobFunction

__all__ = ["MAX_GRAPH_JOBS", "Step", "chain", "group"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One job of a graph: the job function (with its options) and its arguments, already checked."""

    function: JobFunction[..., Any]
    arguments: dict[str, Any]


Link = Step | Sequence[Step]


def chain(*links: Link) -> list[Job]:
    """Enqueue ``links`` so that each waits on the one before (a list or tuple of steps is a group: each of
    its steps waits on the link before, and the next link waits on all of them). Returns every job stored,
    in order."""
    levels = [_level(link, index) for index, link in enumerate(links)]
    return _enqueue_levels(levels, chained=True)


def group(*steps: Step) -> list[Job]:
    """Enqueue ``steps`` side by side (each with its own options, none waiting on another). Returns them."""
    return _enqueue_levels([_level(list(steps), 0)], chained=False)


def _level(link: object, index: int) -> list[Step]:
    steps = [link] if isinstance(link, Step) else link
    if isinstance(steps, str | bytes) or not isinstance(steps, Sequence) or not steps:
        raise TypeError(
            f"link {index} must be a step (fn.step(...)) or a non-empty list of steps, got {link!r}"
        )
    for step in steps:
        if not isinstance(step, Step):
            raise TypeError(f"link {index} holds {step!r}: build each step with fn.step(...)")
    return list(steps)


def _enqueue_levels(levels: list[list[Step]], *, chained: bool) -> list[Job]:
    from django.db import transaction
    from django.utils import timezone

    from . import conf, telemetry
    from .registry import job_rows
    from .store import get_store

    total = sum(len(level) for level in levels)
    if total > MAX_GRAPH_JOBS:
        raise ValueError(
            f"one graph may hold at most {MAX_GRAPH_JOBS} jobs, got {total}: enqueue it in parts (a later "
            "part may depend on the jobs an earlier one returned)"
        )
    settings = conf.get()
    store = get_store(settings.database)
    now = timezone.now()
    jobs: list[Job] = []
    before: tuple[int, ...] = ()
    with transaction.atomic(using=store.using):
        for level in levels:
            new_jobs = [
                job for step in level for job in step.function._new_jobs([step.arguments], now, before)
            ]
            done = store.enqueue(new_jobs, now=now, max_payload_bytes=settings.max_payload_bytes)
            rows = job_rows(new_jobs, done, now, store.using)
            jobs += rows
            if chained:
                before = tuple(row.id for row in rows)
    for step in (step for level in levels for step in level):
        telemetry.enqueued(step.function._options.queue or step.function.registration.queue, 1)
    return jobs
