"""The Node Driver's maintenance: sweeping lapsed leases, minting schedule ticks, purging finished jobs.

Each runs on the maintenance cadence (whether or not the pool is full), has at most one call in flight, and
follows a full batch at once with another, so a backlog (a crashed node's leases, a long retention) is worked
off without waiting for the next tick. None runs during a shutdown.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from . import commands as cmd
from . import events as ev
from .dispatch import Policy
from .retention import MAX_PURGE_BATCH, RetentionRule, purges
from .retry import RetryPolicy
from .schedules import Walkers, plan

#: After a failed purge, the next waits this long (or a maintenance interval, when that is longer).
PURGE_RETRY = timedelta(minutes=1)


class Maintenance:
    def __init__(
        self,
        *,
        policy: Policy,
        interval: timedelta,
        max_sweep: int,
        retry: RetryPolicy,
        retention: tuple[RetentionRule, ...],
        misfire_grace: timedelta,
    ) -> None:
        self.queues = policy.served_queues
        self.interval = interval
        self.max_sweep = max_sweep
        self.retry = retry
        self.retention = retention
        self.misfire_grace = misfire_grace
        self.walkers = Walkers()
        self.last: datetime | None = None
        self.expiring = self.loading = self.minting = self.purging = False
        self.purge_after: datetime | None = None  # after a failed purge: not before this

    def due(self, now: datetime, *, sweep: bool = True) -> list[cmd.Command]:
        """A maintenance tick: what is not already in flight starts, once per interval (the sweep only when
        a lease may have lapsed: ``sweep``)."""
        if self.last is not None and now - self.last < self.interval:
            return []
        if self.expiring and (self.loading or self.minting) and (self.purging or not self.retention):
            return []  # everything is still in flight: the interval starts again when something can start
        self.last = now
        commands: list[cmd.Command] = []
        if sweep and not self.expiring:
            commands.append(self._expire())
        if not (self.loading or self.minting):
            self.loading = True
            commands.append(cmd.LoadSchedules(queues=self.queues))
        if not self.purging and (self.purge_after is None or now >= self.purge_after):
            commands += self._purge(now)
        return commands

    def _expire(self) -> cmd.ExpireLeases:
        self.expiring = True
        return cmd.ExpireLeases(queues=self.queues, max_jobs=self.max_sweep, retry=self.retry)

    def _purge(self, now: datetime) -> list[cmd.Command]:
        rules = purges(self.retention, now)
        if not rules:
            return []
        self.purging = True
        return [cmd.PurgeFinished(rules=rules, max_jobs=MAX_PURGE_BATCH)]

    def leases_expired(self, event: ev.LeasesExpired, *, draining: bool) -> list[cmd.Command]:
        self.expiring = False
        full = not event.failed and event.count >= self.max_sweep
        return [self._expire()] if full and not draining else []

    def schedules_loaded(self, event: ev.SchedulesLoaded, *, draining: bool) -> list[cmd.Command]:
        self.loading = False
        if event.failed or draining:
            return []
        grace, walkers = self.misfire_grace, self.walkers
        decisions = [
            d for s in event.schedules if (d := plan(s, event.now, grace, walkers=walkers)) is not None
        ]
        if not decisions:
            return []
        self.minting = True
        return [cmd.MintSchedules(decisions=tuple(decisions))]

    def schedules_minted(self, event: ev.SchedulesMinted) -> list[cmd.Command]:
        self.minting = False
        return [cmd.RequestPoll()] if event.minted > 0 else []  # a minted job is due now: look for it

    def purged(self, event: ev.FinishedPurged, *, draining: bool) -> list[cmd.Command]:
        self.purging = False
        if event.failed:  # purging can wait: it is retried well after the store has had time to recover
            self.purge_after = event.now + max(self.interval, PURGE_RETRY)
        full = not event.failed and event.count >= MAX_PURGE_BATCH
        return self._purge(event.now) if full and not draining else []
