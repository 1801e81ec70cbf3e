"""The simulator is pure, like the Core: no Django, no threads, no clock, no global randomness."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import backwave_django.simulation

SIMULATION = Path(backwave_django.simulation.__file__).parent
MODULES = sorted(SIMULATION.glob("*.py"))
FORBIDDEN_IMPORTS = {
    "django", "threading", "_thread", "time", "asyncio", "multiprocessing", "concurrent", "socket",
    "subprocess", "psycopg", "sqlite3", "secrets",
}  # fmt: skip
CLOCK_READS = (".now(", ".utcnow(", ".today(", "monotonic", "perf_counter", "os.times", "sleep(")


def imported(source: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def global_random(source: str) -> list[str]:
    """Uses of the ``random`` module's shared generator: anything from it but the ``Random`` class."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "random":
            if node.attr != "Random":
                found.append(f"random.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "random":
            found += [f"from random import {a.name}" for a in node.names if a.name != "Random"]
    return found


def test_there_are_modules_to_check():
    assert {"plan", "cluster", "pump", "invariants", "__main__"} <= {path.stem for path in MODULES}


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_module_imports_django_threads_time_or_io(path):
    assert [name for name in imported(path.read_text()) if name.split(".")[0] in FORBIDDEN_IMPORTS] == []


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_module_draws_from_the_global_random_generator(path):
    assert global_random(path.read_text()) == []


@pytest.mark.parametrize("path", [p for p in MODULES if p.name != "__main__.py"], ids=lambda path: path.name)
def test_no_module_of_a_run_reads_a_clock(path):
    assert [read for read in CLOCK_READS if read in path.read_text()] == []


def test_only_the_command_line_reads_elapsed_time_and_only_for_its_summary():
    source = (SIMULATION / "__main__.py").read_text()
    assert [read for read in CLOCK_READS if read in source] == ["os.times"]


def test_the_scanners_catch_what_they_look_for():
    assert global_random("import random\nx = random.random()\ny = random.Random(3)\n") == ["random.random"]
    assert global_random("from random import choice, Random\n") == ["from random import choice"]
    assert imported("import time\nfrom threading import Lock\nfrom . import timeline\n") == [
        "time",
        "threading",
    ]


def test_importing_the_simulator_loads_no_django():
    modules = " ".join(
        f"backwave_django.simulation.{path.stem}" for path in MODULES if path.stem != "__main__"
    )
    program = (
        f"import sys, {modules.replace(' ', ', ')}; print(sorted(m for m in sys.modules if m == 'django'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=SIMULATION.parents[1]
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_the_command_line_loads_no_django_either():
    program = "import sys, backwave_django.simulation.__main__; print('django' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=SIMULATION.parents[1]
    )
    assert result.stdout.strip() == "False", result.stderr
