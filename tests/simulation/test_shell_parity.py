"""The simulated Pump obeys every command the real runner obeys, and schedules and retention really run."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from backwave_django.core import commands as cmd
from backwave_django.core.replies import STORE_COMMANDS
from backwave_django.shell import runner as runner_module
from backwave_django.simulation.run import run

PACKAGE = Path(cmd.__file__).parents[1]


def obeyed(path: Path) -> set[str]:
    """The command classes a module's ``match`` statements have a case for (``case cmd.X(...)``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        cls = node.cls if isinstance(node, ast.MatchClass) else None
        if isinstance(cls, ast.Attribute) and isinstance(cls.value, ast.Name) and cls.value.id == "cmd":
            found.add(cls.attr)
    return found


def test_the_runner_has_a_handler_and_the_simulated_pump_a_case_for_every_command():
    every = {kind.__name__ for kind in get_args(cmd.Command)}
    assert {kind.__name__ for kind in runner_module.HANDLERS} == every
    assert every - obeyed(PACKAGE / "simulation" / "pump.py") == set()
    assert {kind.__name__ for kind in STORE_COMMANDS} <= every


def test_schedules_mint_and_retention_purges_across_a_few_seeds():
    outcomes = [run(seed) for seed in range(4)]
    assert sum(o.minted for o in outcomes) > 0 and sum(o.purged for o in outcomes) > 0
    assert all(o.violation is None for o in outcomes)


def test_a_purge_the_store_refuses_for_good_is_answered_failed_and_never_halts_the_pump():
    lines = run(36, tracing=True).lines  # its first purge meets a fault the store does not call transient
    fault = next(i for i, line in enumerate(lines) if "FAULT store-fatal purge" in line)
    pump = lines[fault].split()[1].split("/")[0]
    after = [line.split(maxsplit=2)[2] for line in lines[fault:] if line.split()[1] == pump]
    assert "<- FinishedPurged 0 failed" in after[:8]
    assert not any("StoreFaulted FATAL" in line or "-> Halt" in line for line in after[:8])
