"""A worker node: the Pumps of one or more worker groups in this process, plus the hint listener.

``backwave_pump`` builds one, starts it, and on SIGTERM/SIGINT drains it: each Pump stops claiming, lets
running handlers finish for up to SHUTDOWN_GRACE, asks the rest to stop, cuts off from the database those
that do not stop within a short window, writes their outcomes (a job whose handler stopped or was cut off
is given back without counting the Attempt), and ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import connections
from django.utils import timezone

from .. import conf, schedules
from ..core.driver import FINAL_FLUSH_WINDOW, STOP_WINDOW
from ..core.health import GroupHealth, group_health
from ..registry import Registry, registry
from ..store import get_store, sqlite_gate
from ..store.contract import JobStore
from .clock import Clock
from .listener import HintListener
from .pump import Pump

logger = logging.getLogger("backwave.node")
#: Pump status rows that have not beaten for this long are deleted when a node starts.
FORGET_PUMPS_AFTER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    group: str
    pumps: int
    state: GroupHealth


class Node:
    def __init__(
        self,
        groups: Sequence[str],
        *,
        settings: conf.Settings | None = None,
        registry: Registry = registry,
        store: JobStore | None = None,
        hints: bool | None = None,
        reconnect_delay: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        settings = settings or conf.get()
        unknown = [name for name in groups if name not in settings.groups]
        if unknown:
            raise ValueError(
                f"unknown worker group(s) {unknown}; BACKWAVE['GROUPS'] defines {sorted(settings.groups)}"
            )
        self.settings = settings
        self.groups = [settings.groups[name] for name in groups]
        self.hints = settings.hints if hints is None else hints
        self.store = store or get_store(settings.database)
        self.pumps = [
            Pump(
                group,
                store=store or get_store(settings.database),  # its own, unless one (in memory) is shared
                registry=registry,
                retry=settings.retry,
                index=i,
                hints=self.hints,
                clock=clock,
                retention=settings.retention.rules(group.queues),
                max_output_bytes=settings.max_output_bytes,
            )
            for group in self.groups
            for i in range(group.pumps)
        ]
        self.registry = registry
        self.listener: HintListener | None = None
        uses_postgres = (
            self.store.using in connections.settings and connections[self.store.using].vendor == "postgresql"
        )
        if self.hints and uses_postgres:
            alias = settings.listen_alias if store is None else self.store.using
            channel = settings.hint_channel
            self.listener = HintListener(alias, channel=channel, reconnect_delay=reconnect_delay)

    @property
    def queues(self) -> list[str]:
        return sorted({queue for group in self.groups for queue in group.queues})

    def start(self) -> None:
        sqlite_gate.install()  # one writer at a time per SQLite file among this process's threads
        now = timezone.now()
        self.store.forget_pumps(silent_since=now - FORGET_PUMPS_AFTER)
        synced = schedules.sync(self.store, self.settings, self.registry, now=now)
        changes = {"added": synced.added, "changed": synced.changed, "removed": synced.removed}
        for verb, names in changes.items():
            if names:
                logger.info("schedules %s: %s", verb, ", ".join(names))
        logger.info("%s", self.hint_mode())
        if self.listener:
            self.listener.start()
        for pump in self.pumps:
            pump.start()
            logger.info(
                "pump started: group=%s queues=%s pool_size=%d worker=%s",
                pump.group.name, ",".join(pump.group.queues), pump.group.pool_size, pump.worker_id,
            )  # fmt: skip

    def hint_mode(self) -> str:
        """How Pumps of this process learn of new jobs, in a line for the log."""
        poll = min(group.poll_interval for group in self.groups).total_seconds()
        polling = f"the Pumps also poll every {poll:g} s (POLL_INTERVAL)"
        if self.listener is not None:
            where = connections[self.listener.using].settings_dict
            return (
                f"wake-up hints: LISTEN {self.listener.channel} on database alias {self.listener.using!r} "
                f"({where.get('HOST') or 'local'}:{where.get('PORT') or 'default port'}); {polling}"
            )
        if self.hints:
            return (
                "wake-up hints: within this process only (no LISTEN/NOTIFY on this database); jobs enqueued "
                f"by other processes are found by polling: {polling}"
            )
        return f"wake-up hints: off (HINTS is False or --no-hints); {polling}"

    def health(self) -> list[GroupStatus]:
        found = []
        for group in self.groups:
            pumps = [p for p in self.pumps if p.group is group]
            found.append(GroupStatus(group.name, len(pumps), group_health(p.health for p in pumps)))
        return found

    def idle(self, horizon: float) -> bool:
        """Nothing running or buffered, and no job due within ``horizon`` seconds (for --burst). A lease that
        lapses within the horizon counts as due: its job will run again (a crashed worker's, say)."""
        if any(p.busy for p in self.pumps if p.alive):
            return False
        now = timezone.now()
        # Leases first: a sweep turns a lapsed lease into a scheduled job in one commit, so read in this
        # order the job is seen as one or the other (the other order can miss it between the two reads).
        expiry = self.store.next_lease_expiry(self.queues)
        times = [self.store.next_due(self.queues, now=now), expiry]
        upcoming = [t for t in times if t is not None]
        idle = not upcoming or (min(upcoming) - now).total_seconds() > horizon
        if self.store.using in connections.settings:
            connections[self.store.using].close()
        return idle

    def stop(self, grace: float | None = None) -> int:
        """Drain every Pump (see the module's docstring) and wait for them. Returns the number of handler
        threads still running (cut off from the database, never reported): the caller may end the process."""
        limit = grace if grace is not None else max(g.shutdown_grace.total_seconds() for g in self.groups)
        for pump in self.pumps:
            pump.shutdown(timedelta(seconds=limit))
        windows = (STOP_WINDOW + FINAL_FLUSH_WINDOW).total_seconds()
        deadline = time.monotonic() + limit + windows + 5.0
        for pump in self.pumps:
            if not pump.join(max(0.0, deadline - time.monotonic())):
                logger.error("pump %s did not stop within its grace period and windows", pump.worker_id)
        if self.listener:
            self.listener.stop()
        return sum(p.stuck_threads for p in self.pumps) + sum(p.alive for p in self.pumps)

    def join(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for pump in self.pumps:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not pump.join(remaining):
                return False
        return True
