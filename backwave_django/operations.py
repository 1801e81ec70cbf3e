"""Operator actions for code, shells and the admin: each is one store transition, recorded with the actor.

These are thin conveniences over the store: they read the clock and the configured database for you.
"""

from __future__ import annotations

from django.utils import timezone

from .store import CancelResult, RequeueResult, get_store
from .store.contract import TriggerResult


def cancel_job(job_id: int, *, actor: str) -> CancelResult:
    """Cancel a pending job at once, or ask a running one to stop (at its next heartbeat)."""
    return get_store().cancel(job_id, actor=actor, now=timezone.now())


def requeue_job(job_id: int, *, actor: str) -> RequeueResult:
    """Run a dead-lettered or quarantined job again, from attempt 0, now. ``KEY_TAKEN``: its unique key is
    held by another unfinished job of its wire name, so it stays as it is."""
    return get_store().requeue(job_id, actor=actor, now=timezone.now())


def pause_queue(queue: str, *, actor: str) -> None:
    """Stop claims from ``queue`` across the cluster; running jobs finish normally."""
    get_store().pause_queue(queue, actor=actor, now=timezone.now())


def resume_queue(queue: str, *, actor: str) -> None:
    """Let claims from ``queue`` start again after :func:`pause_queue`."""
    get_store().resume_queue(queue, actor=actor, now=timezone.now())


def set_concurrency_limit(queue: str, limit: int | None, *, actor: str) -> None:
    """Cap how many jobs of ``queue`` run at once across the cluster (None: no cap)."""
    get_store().set_concurrency_limit(queue, limit, actor=actor, now=timezone.now())


def pause_schedule(name: str, *, actor: str) -> bool:
    """Stop a schedule minting (its ticks are skipped, and counted, while paused). False: no such schedule."""
    return get_store().pause_schedule(name, actor=actor, now=timezone.now())


def resume_schedule(name: str, *, actor: str) -> bool:
    """Mint again from the next tick on. False: no such schedule."""
    return get_store().resume_schedule(name, actor=actor, now=timezone.now())


def trigger_schedule(name: str, *, actor: str) -> TriggerResult:
    """Run a schedule's job once now, outside its cadence (the schedule's cursor does not move). An operator's
    override: it mints even while a run is unfinished under ``NO_OVERLAP``, and ticks that come while this run
    is unfinished are then skipped."""
    return get_store().trigger_schedule(name, actor=actor, now=timezone.now())
