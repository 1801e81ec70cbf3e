"""Every seed that once found a bug replays clean: as drawn, and with only its minimized faults."""

from __future__ import annotations

from pathlib import Path

import pytest

from backwave_django.simulation import regressions
from backwave_django.simulation.invariants import INVARIANTS
from backwave_django.simulation.run import run

FOLDER = Path(__file__).parent / "regressions"
FILES = regressions.all_in(FOLDER)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_a_regression_seed_replays_clean(path):
    kept = regressions.load(path)
    assert kept.invariant in INVARIANTS
    assert run(kept.seed).violation is None
    assert run(kept.seed, plan=kept.plan).violation is None


def test_each_regression_file_says_what_it_found():
    for path in FILES:
        kept = regressions.load(path)
        assert path.stem == str(kept.seed)
        assert kept.note, f"{path.name}: say which bug it found and where it was fixed"
