"""The Core is pure: no Django, no threads, no clock, no database. Only the Shell does I/O."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

import backwave_django.core

CORE = Path(backwave_django.core.__file__).parent
CORE_MODULES = sorted(CORE.glob("*.py"))

FORBIDDEN_IMPORTS = {
    "django",
    "threading",
    "_thread",
    "time",
    "psycopg",
    "psycopg2",
    "sqlite3",
    "socket",
    "asyncio",
    "multiprocessing",
    "concurrent",
    "random",
}
CLOCK_READS = (".now(", ".utcnow(", ".today(", "time.time", "monotonic", "perf_counter")


def forbidden_imports(source: str) -> list[str]:
    """The top-level packages of every import in ``source`` that the Core must not use."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in FORBIDDEN_IMPORTS]
    return found


def clock_reads(source: str) -> list[str]:
    """Clock reads in the code of ``source``; comments and strings (docstrings) are not code."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    code = "".join(
        token.string
        for token in tokens
        if token.type not in (tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.NEWLINE)
    )
    return [read for read in CLOCK_READS if read in code]


def test_importing_the_driver_loads_no_django_and_no_database_driver():
    program = (
        "import sys, backwave_django.core.driver, backwave_django.core.dispatch; "
        "print(sorted(m for m in ('django','psycopg','sqlite3') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=CORE.parent.parent
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_the_core_has_modules_to_check():
    names = {path.stem for path in CORE_MODULES}
    assert {"states", "retry", "dispatch", "records", "events", "commands", "driver"} <= names


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda path: path.name)
def test_no_core_module_imports_django_threads_a_clock_or_a_database(path):
    assert forbidden_imports(path.read_text()) == []


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda path: path.name)
def test_no_core_module_reads_the_clock(path):
    assert clock_reads(path.read_text()) == []


def test_the_scanners_catch_what_they_look_for():
    impure = (
        "import time, os\n"
        "import django.db\n"
        "from threading import Lock\n"
        "from psycopg import connect\n"
        "from . import sqlite3\n"  # a sibling module named like one is fine
        "stamp = datetime.now()\n"
        "tick = time.monotonic()\n"
    )
    assert forbidden_imports(impure) == ["time", "django.db", "threading", "psycopg"]
    assert clock_reads(impure) == [".now(", "monotonic"]
    assert clock_reads('"""Never call datetime.now() here."""  # nor time.time\nx = 1\n') == []
