"""The simulator's page names every invariant, fault kind and planted bug, as the code describes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from backwave_django.simulation.invariants import INVARIANTS
from backwave_django.simulation.plants import PLANTS
from backwave_django.simulation.scenario import FAULT_BANDS

DOCS = Path(__file__).parents[2] / "docs"
PAGE = (DOCS / "explanation" / "simulator.md").read_text()
PLAIN = PAGE.replace("`", "")  # the code's lines, without the page's markup


@pytest.mark.parametrize("name", sorted(INVARIANTS))
def test_the_page_gives_each_invariant_its_line(name):
    assert f"| {name} | {INVARIANTS[name]}" in PLAIN


@pytest.mark.parametrize("kind", sorted(FAULT_BANDS))
def test_the_page_describes_each_fault_kind(kind):
    assert f"`{kind}`" in PAGE


@pytest.mark.parametrize("plant", PLANTS, ids=lambda plant: plant.name)
def test_the_page_lists_each_planted_bug(plant):
    assert f"{plant.name}: {plant.description}" in PLAIN


def test_the_index_links_the_page():
    assert "(explanation/simulator.md)" in (DOCS / "index.md").read_text()
