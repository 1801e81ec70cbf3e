"""A worker node: the Pumps of one or more worker groups in this process, plus the hint listener.

``backwave_pump`` builds one, starts it, and on SIGTERM/SIGINT drains it: stop claiming, let running
handlers finish for up to SHUTDOWN_GRACE, flush their outcomes, then release the leases of whatever still
runs so other nodes pick it up at once (without charging an attempt).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import connections
from django.utils import timezone

from .. import conf
from ..registry import Registry, registry
from ..store import get_store
from .listener import HintListener
from .pump import HALTED, Pump

logger = logging.getLogger("backwave.node")
#: Pump status rows that have not beaten for this long are deleted when a node starts.
FORGET_PUMPS_AFTER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class GroupHealth:
    group: str
    pumps: int
    halted: int
    degraded: int
    stopped: int = 0

    @property
    def state(self) -> str:
        if self.stopped == self.pumps:
            return "stopped"
        if self.halted == self.pumps:
            return "halted"
        if self.halted:
            return "partially halted"
        return "degraded" if self.degraded else "running"


class Node:
    def __init__(
        self,
        groups: Sequence[str],
        *,
        registry: Registry = registry,
        hints: bool | None = None,
        reconnect_delay: float = 5.0,
    ) -> None:
        settings = conf.get()
        unknown = [name for name in groups if name not in settings.groups]
        if unknown:
            raise ValueError(
                f"unknown worker group(s) {unknown}; BACKWAVE['GROUPS'] defines {sorted(settings.groups)}"
            )
        self.settings = settings
        self.groups = [settings.groups[name] for name in groups]
        self.hints = settings.hints if hints is None else hints
        self.pumps = [
            Pump(
                group,
                registry=registry,
                retry=settings.retry,
                using=settings.database,
                index=i,
                hints=self.hints,
            )
            for group in self.groups
            for i in range(group.pumps)
        ]
        self.listener: HintListener | None = None
        if self.hints and connections[settings.database].vendor == "postgresql":
            self.listener = HintListener(settings.database, reconnect_delay=reconnect_delay)
        self.store = get_store(settings.database)

    @property
    def queues(self) -> list[str]:
        return sorted({queue for group in self.groups for queue in group.queues})

    def start(self) -> None:
        self.store.forget_pumps(silent_since=timezone.now() - FORGET_PUMPS_AFTER)
        if self.listener:
            self.listener.start()
        for pump in self.pumps:
            pump.start()
            logger.info(
                "pump started: group=%s queues=%s pool_size=%d worker=%s",
                pump.group.name, ",".join(pump.group.queues), pump.group.pool_size, pump.worker_id,
            )  # fmt: skip

    def health(self) -> list[GroupHealth]:
        found = []
        for group in self.groups:
            pumps = [p for p in self.pumps if p.group is group]
            halted = sum(p.health == HALTED for p in pumps)
            degraded = sum(p.health == "degraded" for p in pumps)
            stopped = sum(p.health == "stopped" for p in pumps)
            found.append(GroupHealth(group.name, len(pumps), halted, degraded, stopped))
        return found

    def idle(self, horizon: float) -> bool:
        """Nothing running or buffered, and no job due within ``horizon`` seconds (for --burst). A lease that
        lapses within the horizon counts as due: its job will run again (a crashed worker's, say)."""
        if any(p.busy for p in self.pumps if p.alive):
            return False
        now = timezone.now()
        times = [self.store.next_due(self.queues, now=now), self.store.next_lease_expiry(self.queues)]
        upcoming = [t for t in times if t is not None]
        idle = not upcoming or (min(upcoming) - now).total_seconds() > horizon
        connections[self.store.using].close()
        return idle

    def stop(self, grace: float | None = None) -> None:
        """Drain: stop claiming, wait for handlers up to the grace period, then release what still runs."""
        for pump in self.pumps:
            pump.shutdown()
        limit = grace if grace is not None else max(g.shutdown_grace.total_seconds() for g in self.groups)
        deadline = time.monotonic() + limit
        for pump in self.pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        for pump in self.pumps:
            if pump.alive:
                pump.expire_grace()
        for pump in self.pumps:
            if not pump.join(30):
                logger.error("pump %s did not stop within 30 s of its grace period", pump.worker_id)
        if self.listener:
            self.listener.stop()

    def join(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for pump in self.pumps:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not pump.join(remaining):
                return False
        return True
