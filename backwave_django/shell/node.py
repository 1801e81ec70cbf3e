"""A worker node: the Pumps of one or more worker groups in this process, plus the hint listener.

``backwave_pump`` builds one, starts it, and on SIGTERM/SIGINT drains it: each Pump stops claiming, lets
running handlers finish for up to SHUTDOWN_GRACE, asks the rest to stop, cuts off from the database those
that do not stop within a short window, writes their outcomes (a job whose handler stopped or was cut off
is given back without counting the Attempt), and ends.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import connections
from django.utils import timezone

from .. import conf, schedules
from ..core import elastic
from ..core.driver import FINAL_FLUSH_WINDOW, STOP_WINDOW
from ..core.health import GroupHealth, group_health
from ..core.text import describe
from ..registry import Registry, registry
from ..store import get_store, sqlite_gate
from ..store.contract import JobStore
from .clock import Clock
from .listener import HintListener
from .pump import Pump

logger = logging.getLogger("backwave.node")
#: Pump status rows that have not beaten for this long are deleted when a node starts.
FORGET_PUMPS_AFTER = timedelta(days=1)
#: How often a process running a node looks at its Pumps and calls :meth:`Node.adapt` (seconds).
TICK = 0.05


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
        self.registry = registry
        self._shared_store = store  # one store for every Pump (in memory), or None: each Pump its own
        self._clock = clock
        self.pumps = [self._new_pump(group, i) for group in self.groups for i in range(group.pumps)]
        self.leaving: list[Pump] = []  # extra Pumps letting go (core.elastic), until they have ended
        self._gone_processed = 0  # outcomes applied by extra Pumps that have ended
        self._fixed: set[str] = set()  # groups that could not grow (a Pump failed to start)
        self.listener: HintListener | None = None
        uses_postgres = (
            self.store.using in connections.settings and connections[self.store.using].vendor == "postgresql"
        )
        if self.hints and uses_postgres:
            alias = settings.listen_alias if store is None else self.store.using
            channel = settings.hint_channel
            self.listener = HintListener(alias, channel=channel, reconnect_delay=reconnect_delay)

    def _new_pump(self, group: conf.GroupSettings, index: int) -> Pump:
        settings = self.settings
        return Pump(
            group,
            store=self._shared_store or get_store(settings.database),
            registry=self.registry,
            retry=settings.retry,
            index=index,
            hints=self.hints,
            clock=self._clock,
            retention=settings.retention.rules(group.queues),
            max_output_bytes=settings.max_output_bytes,
        )

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
            self._start(pump, "pump started")

    def _start(self, pump: Pump, what: str) -> None:
        pump.start()
        logger.info(
            "%s: group=%s queues=%s pool_size=%d worker=%s",
            what, pump.group.name, ",".join(pump.group.queues), pump.group.pool_size, pump.worker_id,
        )  # fmt: skip

    def adapt(self) -> None:
        """Grow or shrink each group between PUMPS and MAX_PUMPS by :func:`core.elastic.resize`; called
        often (every tick of ``backwave_pump``). An extra Pump that lets go drains like one at shutdown:
        it claims nothing more, its running jobs finish and are reported, and its status row is removed."""
        for pump in [p for p in self.leaving if not p.alive]:
            self.leaving.remove(pump)
            self._gone_processed += pump.processed
            try:
                self.store.forget_pump(pump.worker_id)
            except Exception as exc:  # its row goes with the others after FORGET_PUMPS_AFTER
                logger.warning("could not remove the status of pump %s: %s", pump.worker_id, describe(exc))
        if self.store.one_writer_at_a_time:
            return
        now = self._clock.now() if self._clock else timezone.now()
        for group in self.groups:
            if group.max_pumps <= group.pumps or group.name in self._fixed:
                continue
            running = [p for p in self.pumps if p.group is group]
            if not all(p.alive for p in running):
                continue  # a Pump halted: the group is halted, not resized
            change = elastic.resize(
                [p.driver.starvation for p in running], floor=group.pumps, ceiling=group.max_pumps, now=now
            )
            if change > 0:
                self._grow(group, max(p.index for p in running) + 1)
            elif change < 0:
                pump = max(running, key=lambda p: p.index)
                self.pumps.remove(pump)
                self.leaving.append(pump)
                pump.shutdown(group.shutdown_grace)
                logger.info("pump letting go (no backlog): group=%s worker=%s", group.name, pump.worker_id)

    def _grow(self, group: conf.GroupSettings, index: int) -> None:
        pump = self._new_pump(group, index)
        try:
            self._start(pump, "pump added for a backlog")
        except Exception as exc:  # no thread to be had, say: the group goes on as it is, and stays so
            logger.error("could not add a pump to group %s, which stays fixed: %s", group.name, describe(exc))
            self._fixed.add(group.name)
            with contextlib.suppress(Exception):
                pump.close()  # what it opened (threads, its hint subscription); its loop never ran
            return
        self.pumps.append(pump)

    @property
    def processed(self) -> int:
        """Outcomes applied by every Pump this node has run."""
        return self._gone_processed + sum(p.processed for p in (*self.pumps, *self.leaving))

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

    @property
    def busy(self) -> bool:
        """A Pump of this node (one letting go included) has something running, buffered or in flight."""
        return any(p.busy for p in (*self.pumps, *self.leaving) if p.alive)

    @property
    def alive(self) -> bool:
        return any(p.alive for p in (*self.pumps, *self.leaving))

    def idle(self, horizon: float) -> bool:
        """Nothing running or buffered, and no job due within ``horizon`` seconds (for --burst). A lease that
        lapses within the horizon counts as due: its job will run again (a crashed worker's, say)."""
        if self.busy:
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
        for pump in (*self.pumps, *self.leaving):  # one letting go keeps its grace unless this ends sooner
            pump.shutdown(timedelta(seconds=limit))
        windows = (STOP_WINDOW + FINAL_FLUSH_WINDOW).total_seconds()
        deadline = time.monotonic() + limit + windows + 5.0
        for pump in (*self.pumps, *self.leaving):
            if not pump.join(max(0.0, deadline - time.monotonic())):
                logger.error("pump %s did not stop within its grace period and windows", pump.worker_id)
        if self.listener:
            self.listener.stop()
        every = (*self.pumps, *self.leaving)
        return sum(p.stuck_threads for p in every) + sum(p.alive for p in every)

    def join(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for pump in (*self.pumps, *self.leaving):
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not pump.join(remaining):
                return False
        return True
