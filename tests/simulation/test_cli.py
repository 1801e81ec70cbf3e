"""``python -m backwave_django.simulation``: one summary line, exact replays, failures shown and kept."""

from __future__ import annotations

import json
from pathlib import Path

from backwave_django.simulation import __main__ as cli
from backwave_django.simulation import regressions
from backwave_django.simulation.plants import PLANTS
from backwave_django.simulation.run import run

REGRESSIONS = Path(__file__).parent / "regressions"

PAUSED = next(plant for plant in PLANTS if plant.name == "paused-queue-claimed")


def first_caught(plant=PAUSED):
    return next(outcome for seed in range(100) if (outcome := run(seed, plant=plant)).failed)


def test_a_batch_of_seeds_prints_one_summary_line(capsys):
    assert cli.main(["--seeds", "3", "--first", "10"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("simulation: 3 seeds, ")
    for part in ("steps", "jobs", "faults [crash=", "invariant checks", "0 failed", "seeds/s"):
        assert part in line


def test_one_seed_replays_with_its_trace(capsys):
    assert cli.main(["--seed", "10", "--trace"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("simulation: 1 seed, ")
    assert "seeds/s" not in lines[-1]  # one seed has a time, not a rate
    assert any("<- PollDue" in line for line in lines)
    assert lines[:-1] == list(run(10, tracing=True).lines)


def test_a_failure_prints_the_seed_the_invariant_and_the_shortest_trace(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "FAILURES", tmp_path)
    failure = first_caught()
    shown = cli.show_failure(failure, plant=PAUSED)
    out = capsys.readouterr().out
    assert f"FAILED seed {failure.seed}: PausedQueueNotClaimed" in out
    assert "shortest trace" in out and "VIOLATION PausedQueueNotClaimed" in out
    assert shown.violation is not None and shown.violation.name == "PausedQueueNotClaimed"
    assert len(shown.plan) <= len(failure.plan)
    assert f"--seed {failure.seed} --trace --plant paused-queue-claimed" in out


def test_the_replay_printed_for_a_failure_replays_its_shortest_run(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "FAILURES", tmp_path)
    shown = cli.show_failure(first_caught(), plant=PAUSED)
    [command] = [line for line in capsys.readouterr().out.splitlines() if "replay this shortest run" in line]
    arguments = command.split("python -m backwave_django.simulation ")[1].split()
    assert arguments == ["--replay", str(tmp_path / f"{shown.seed}.json"), "--plant", "paused-queue-claimed"]
    assert cli.main(arguments) == 1
    assert capsys.readouterr().out.splitlines()[:-1] == list(shown.lines)


def test_forever_writes_each_failing_seed_where_a_test_replays_it(tmp_path, monkeypatch, capsys):
    failure = first_caught()
    calls = []

    def fake_run(seed, **options):
        calls.append(seed)
        if len(calls) > 2:
            raise KeyboardInterrupt
        return failure if len(calls) == 1 else run(seed)

    monkeypatch.setattr(cli, "run", fake_run)
    monkeypatch.setattr(cli, "minimize", lambda outcome, plant=None: outcome)
    assert cli.main(["--forever", "--first", "5", "--regressions", str(tmp_path)]) == 1
    [path] = regressions.all_in(tmp_path)
    assert path.name == f"{failure.seed}.json"
    kept = regressions.load(path)
    assert (kept.seed, kept.invariant) == (failure.seed, "PausedQueueNotClaimed")
    assert "1 failed" in capsys.readouterr().out.splitlines()[-1]


def test_a_regression_file_replays_from_the_command_line(tmp_path, capsys):
    failure = first_caught()
    path = regressions.save(tmp_path, failure, note="planted")
    assert cli.main(["--replay", str(path)]) == 0  # without the plant, the seed is clean
    assert capsys.readouterr().out.splitlines()[-1].endswith("replays clean")


def test_a_kept_seed_whose_plan_no_longer_finds_its_bug_is_recorded_again(tmp_path, monkeypatch, capsys):
    data = json.loads((REGRESSIONS / "494.json").read_text())
    data["plan"] = []  # as if a change to the simulator had moved every fault off the bug
    path = tmp_path / "494.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(cli, "minimize", lambda outcome, plant=None: outcome)
    assert cli.main(["--rerecord", str(path)]) == 0
    kept, again = regressions.load(REGRESSIONS / "494.json"), regressions.load(path)
    assert (again.bug, again.invariant, again.note, again.scenario) == (
        kept.bug, kept.invariant, kept.note, kept.scenario,
    )  # fmt: skip
    assert again.plan  # found again from every fault the pinned scenario draws
    assert "seed 494 trips TimeLimitHolds" in capsys.readouterr().out
