"""Failing seeds kept as regression tests: one JSON file per seed, replayed by ``tests/simulation``.

A file holds the seed, the invariant it tripped, the message, the engine fix it led to (``bug``: the name of
that fix undone, in ``simulation.reverted``), the whole scenario the seed drew when it was found, and the
minimized fault plan. The scenario and the plan together are the regression: replaying them needs nothing
from today's drawing, so a change to how scenarios are drawn (new fields, new faults, schedules) never moves
a kept seed to a run that misses its bug. What a replay still shares with today's simulator is the cluster
itself (the Pump's cycle, the store, the Driver): so the regression test checks both halves, the kept run
clean and, with the fix undone, tripping its invariant again. When a change to the simulator breaks the
second half, ``--rerecord`` finds the bug again for the same scenario, or for another seed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..core.retry import RetryPolicy
from .calendar import ScheduleSpec
from .plan import Address, Params, from_json, to_json
from .run import Outcome
from .scenario import GroupSpec, JobSpec, Scenario

#: The version of the file format: 2 pins the scenario (version 1 files had only the seed and the plan).
FORMAT = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class Regression:
    seed: int
    invariant: str
    message: str
    bug: str  # the engine fix it led to, undone: a name of ``simulation.reverted.REVERTED``
    scenario: Scenario
    plan: dict[Address, Params]
    note: str = ""


def plain(value: Any) -> Any:
    """A scenario (or any part of one) as JSON values."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def scenario_from(data: dict[str, Any]) -> Scenario:
    """A pinned scenario read back. A field the file lacks (it was added to Scenario later) takes its
    default, which means what runs did before the field existed."""
    unknown = set(data) - {f.name for f in fields(Scenario)}
    if unknown:
        raise ValueError(f"a pinned scenario has fields this simulator does not know: {sorted(unknown)}")
    values = dict(data)
    values["queues"] = tuple(values["queues"])
    values["paused"] = tuple(values["paused"])
    values["groups"] = tuple(
        GroupSpec(**{**g, "queues": tuple(g["queues"]), "weights": _tuple(g["weights"])})
        for g in values["groups"]
    )
    values["jobs"] = tuple(
        JobSpec(**{**job, "parents": tuple(job.get("parents", ()))}) for job in values["jobs"]
    )
    values["retry"] = RetryPolicy(**values["retry"])
    if "start" in values:
        values["start"] = datetime.fromisoformat(values["start"])
    if "schedules" in values:
        values["schedules"] = tuple(ScheduleSpec(**spec) for spec in values["schedules"])
    return Scenario(**values)


def _tuple(items: list[int] | None) -> tuple[int, ...] | None:
    return None if items is None else tuple(items)


def save(folder: Path, minimized: Outcome, note: str = "", bug: str = "") -> Path:
    """Write ``minimized`` (a failing run) as ``<folder>/<seed>.json``; returns the path."""
    assert minimized.violation is not None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{minimized.seed}.json"
    head = {
        "format": FORMAT,
        "seed": minimized.seed,
        "invariant": minimized.violation.name,
        "message": minimized.violation.message,
        "bug": bug,
        "note": note,
        "scenario": plain(minimized.scenario),
    }
    lines = [f" {json.dumps(key)}: {json.dumps(value)}," for key, value in head.items()]
    rows = ",\n".join(f"  {json.dumps(row)}" for row in to_json(minimized.plan))
    path.write_text("{\n" + "\n".join(lines) + f'\n "plan": [\n{rows}\n ]\n}}\n')
    return path


def load(path: Path) -> Regression:
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{path}: format {data.get('format', 1)}, not {FORMAT}: it does not pin its scenario, so a "
            "change "
            "to how scenarios are drawn can move it off its bug. Add the scenario its seed drew when it was "
            "found (regressions.plain(scenario)), its 'bug' and '\"format\": 2'."
        )
    return Regression(
        seed=int(data["seed"]),
        invariant=str(data["invariant"]),
        message=str(data.get("message", "")),
        bug=str(data.get("bug", "")),
        scenario=scenario_from(data["scenario"]),
        plan=from_json(data["plan"]),
        note=str(data.get("note", "")),
    )


def all_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"), key=lambda p: p.name)
