"""docs/reference/settings.md follows conf's tables: every key with its range, default and check id, and a row
for every check id the code can raise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import backwave_django
from backwave_django import conf
from backwave_django.conf_kinds import Derived
from backwave_django.conf_schedules import RETENTION_KEYS, SCHEDULE_KEYS

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "docs" / "reference" / "settings.md").read_text()
SECTIONS = {
    "Top-level keys": conf.TOP_LEVEL_KEYS,
    "Group keys": conf.GROUP_KEYS,
    "RETRY": conf.RETRY_KEYS,
    "SCHEDULES": SCHEDULE_KEYS,
    "RETENTION": RETENTION_KEYS,
}


def rows(section: str) -> list[list[str]]:
    """The cells of each row of the table under ``## section`` (not its header)."""
    text = REFERENCE.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| `")]


def documented_default(key: conf.Key) -> str:
    return f"`{key.default.text}`" if isinstance(key.default, Derived) else f"`{key.default!r}`"


@pytest.mark.parametrize("section", SECTIONS)
def test_each_key_is_documented_with_its_range_default_and_check(section):
    table = SECTIONS[section]
    documented = {cells[0].strip("`"): cells for cells in rows(section)}
    assert list(documented) == list(table)
    for name, key in table.items():
        _, rule, default, check, _ = documented[name]
        assert (rule, default) == (key.kind.rule, documented_default(key)), name
        assert f"`{key.check}`" in check, name


def test_the_queues_row_gives_the_weight_range():
    [queues] = [cells for cells in rows("Group keys") if cells[0] == "`QUEUES`"]
    assert f"each weight {conf.QUEUES.weight.rule}" in queues[4]


def test_every_check_id_the_code_raises_is_in_the_checks_table_and_no_other():
    package = Path(backwave_django.__file__).parent
    modules = ("conf.py", "conf_schedules.py", "checks.py", "schedules.py")
    source = "".join((package / name).read_text() for name in modules)
    raised = set(re.findall(r"backwave\.[EW]\d{3}", source))
    documented = {cells[0].strip("`") for cells in rows("System checks")}
    assert documented == raised
