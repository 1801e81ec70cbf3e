"""Failing seeds kept as regression tests: one JSON file per seed, replayed by ``tests/simulation``.

A file holds the seed, the invariant it tripped, the message, and the minimized fault plan. Replaying it
runs the seed twice: as drawn (every fault), and with only the plan's faults (the shortest failing run).
Both must be clean once the bug is fixed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .plan import Address, Params, from_json, to_json
from .run import Outcome


@dataclass(frozen=True, slots=True, kw_only=True)
class Regression:
    seed: int
    invariant: str
    message: str
    plan: dict[Address, Params]
    note: str = ""


def save(folder: Path, minimized: Outcome, note: str = "") -> Path:
    """Write ``minimized`` (a failing run) as ``<folder>/<seed>.json``; returns the path."""
    assert minimized.violation is not None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{minimized.seed}.json"
    head = {
        "seed": minimized.seed,
        "invariant": minimized.violation.name,
        "message": minimized.violation.message,
        "note": note,
    }
    lines = [f" {json.dumps(key)}: {json.dumps(value)}," for key, value in head.items()]
    rows = ",\n".join(f"  {json.dumps(row)}" for row in to_json(minimized.plan))
    path.write_text("{\n" + "\n".join(lines) + f'\n "plan": [\n{rows}\n ]\n}}\n')
    return path


def load(path: Path) -> Regression:
    data = json.loads(path.read_text())
    return Regression(
        seed=int(data["seed"]),
        invariant=str(data["invariant"]),
        message=str(data.get("message", "")),
        plan=from_json(data["plan"]),
        note=str(data.get("note", "")),
    )


def all_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"), key=lambda p: p.name)
