"""Every seed that once found a bug still finds it with its fix undone, and is clean with the fix.

A regression file pins the scenario its seed drew when it was found and the minimized fault plan, so a
change to how scenarios are drawn cannot move it (``simulation.regressions``). A change to the simulated
cluster still can, which is why the second half is checked: with the fix undone (``simulation.reverted``),
the kept run trips the invariant it tripped when it was found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backwave_django.simulation import regressions
from backwave_django.simulation.invariants import INVARIANTS
from backwave_django.simulation.reverted import REVERTED
from backwave_django.simulation.run import run
from backwave_django.simulation.scenario import draw
from backwave_django.simulation.timeline import START

FOLDER = Path(__file__).parent / "regressions"
FILES = regressions.all_in(FOLDER)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_a_regression_seed_replays_clean(path):
    kept = regressions.load(path)
    assert kept.invariant in INVARIANTS
    assert run(kept.seed, scenario=kept.scenario, plan=kept.plan).violation is None


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_a_regression_seed_still_finds_its_bug_with_the_fix_undone(path):
    kept = regressions.load(path)
    assert kept.bug in REVERTED, f"{path.name}: name the fix, undone, in simulation/reverted.py ('bug')"
    found = run(kept.seed, scenario=kept.scenario, plan=kept.plan, plant=REVERTED[kept.bug]).violation
    assert found is not None and found.name == kept.invariant, (
        f"{path.name} no longer reaches its bug: python -m backwave_django.simulation --rerecord {path}"
    )


def test_each_regression_file_says_what_it_found():
    for path in FILES:
        kept = regressions.load(path)
        assert path.stem == str(kept.seed) == str(kept.scenario.seed)
        assert kept.note, f"{path.name}: say which bug it found and where it was fixed"
    assert sorted(regressions.load(path).bug for path in FILES) == sorted(REVERTED)


def test_a_pinned_scenario_reads_back_as_it_was_drawn(tmp_path):
    for seed in (1, 2, 6):  # with schedules, retention and starts before a daylight saving change
        drawn = draw(seed)
        assert drawn.schedules or drawn.retention
        assert regressions.scenario_from(regressions.plain(drawn)) == drawn


def test_a_pinned_scenario_from_before_schedules_reads_with_what_runs_did_then():
    drawn, old = draw(3), regressions.plain(draw(3))
    for later in ("start", "schedules", "retention", "misfire_floor", "schedule_slots"):
        del old[later]
    pinned = regressions.scenario_from(old)
    assert (pinned.start, pinned.schedules, pinned.retention, pinned.schedule_slots) == (START, (), None, 0)
    assert (pinned.groups, pinned.jobs, pinned.retry, pinned.rates) == (
        drawn.groups, drawn.jobs, drawn.retry, drawn.rates,
    )  # fmt: skip


def test_a_file_that_does_not_pin_its_scenario_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "7.json"
    path.write_text('{"seed": 7, "invariant": "NoJobLost", "plan": []}')
    with pytest.raises(ValueError, match="does not pin its scenario"):
        regressions.load(path)


def test_a_pinned_scenario_from_before_job_features_reads_with_what_runs_did_then():
    drawn = draw(4)
    assert any(job.priority or job.unique_key or job.returns for job in drawn.jobs)
    old = regressions.plain(drawn)
    for job in old["jobs"]:
        for later in ("priority", "unique_key", "returns"):
            del job[later]
    pinned = regressions.scenario_from(old)
    assert all((j.priority, j.unique_key, j.returns) == (0, None, False) for j in pinned.jobs)
    assert [(j.key, j.at, j.queue, j.duration) for j in pinned.jobs] == [
        (j.key, j.at, j.queue, j.duration) for j in drawn.jobs
    ]
