"""What the cluster says about its worker groups, from the Pumps' recorded status: one reading shared by
``backwave_health`` and the health endpoint, so the two always agree."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from . import conf
from .core.health import Observed, observe
from .store.contract import JobStore, PumpView


@dataclass(frozen=True, slots=True, kw_only=True)
class PumpReport:
    pump: PumpView
    observed: Observed
    age_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupReport:
    """A group is up while at least one of its Pumps (on ``host``, if given) is running or degraded."""

    group: str
    pumps: list[PumpReport]

    @property
    def serving(self) -> int:
        return sum(report.observed.serving for report in self.pumps)

    @property
    def up(self) -> bool:
        """Live: some Pump of the group runs, if only degraded (retrying a store fault with backoff)."""
        return self.serving > 0

    @property
    def ready(self) -> bool:
        """Ready: some Pump of the group runs and is not degraded, so it claims work now."""
        return any(report.observed is Observed.RUNNING for report in self.pumps)

    def passes(self, probe: str) -> bool:
        """Whether the group passes ``probe``: ``"live"`` (:attr:`up`) or ``"ready"`` (:attr:`ready`)."""
        return self.ready if probe == "ready" else self.up

    @property
    def status(self) -> str:
        """``running`` (every Pump running), ``degraded`` (live, but some Pump is not running) or ``down``."""
        if not self.up:
            return "down"
        return "running" if all(r.observed is Observed.RUNNING for r in self.pumps) else "degraded"

    def counts(self) -> dict[str, int]:
        """Its Pumps by what they were seen to be (cleanly stopped ones are left out)."""
        seen = [report.observed for report in self.pumps]
        return {state.value: seen.count(state) for state in Observed if state is not Observed.STOPPED}


def group_reports(
    store: JobStore, settings: conf.Settings, groups: list[str], *, now: datetime, host: str | None = None
) -> list[GroupReport]:
    """One report per group in ``groups`` (names from ``settings``), cleanly stopped Pumps left out."""
    pumps = store.list_pumps()
    reports = []
    for name in groups:
        beat = settings.groups[name].heartbeat_interval
        rows = [
            PumpReport(
                pump=p,
                observed=observe(p.health, p.last_beat_at, now, beat),
                age_seconds=(now - p.last_beat_at).total_seconds(),
            )
            for p in pumps
            if p.group == name and (host is None or p.host == host)
        ]
        reports.append(GroupReport(group=name, pumps=[r for r in rows if r.observed is not Observed.STOPPED]))
    return reports
