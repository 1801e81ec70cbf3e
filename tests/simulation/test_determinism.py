"""A seed replays exactly: the same trace in this process, in another one, and from its recorded plan."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from backwave_django.simulation.plan import FaultPlan, from_json, to_json
from backwave_django.simulation.run import run

ROOT = Path(__file__).parents[2]
SEED = 7


def digest(lines: tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def test_the_same_seed_gives_the_same_trace():
    first, second = run(SEED, tracing=True), run(SEED, tracing=True)
    assert len(first.lines) > 100
    assert first.lines == second.lines
    assert (first.steps, first.checks, first.faults) == (second.steps, second.checks, second.faults)


def test_different_seeds_give_different_runs():
    assert digest(run(SEED, tracing=True).lines) != digest(run(SEED + 1, tracing=True).lines)


def test_another_process_with_another_string_hash_gives_the_same_trace():
    program = (
        "import hashlib; from backwave_django.simulation.run import run; "
        f"print(hashlib.sha256(chr(10).join(run({SEED}, tracing=True).lines).encode()).hexdigest())"
    )
    expected = digest(run(SEED, tracing=True).lines)
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=ROOT, env=env
        )
        assert result.stdout.strip() == expected


def test_tracing_changes_nothing_but_the_trace():
    quiet, traced = run(SEED), run(SEED, tracing=True)
    assert (quiet.steps, quiet.actions, quiet.checks, quiet.plan) == (
        traced.steps, traced.actions, traced.checks, traced.plan,
    )  # fmt: skip
    assert quiet.lines == ()


def test_replaying_the_recorded_plan_reproduces_the_run():
    drawn = run(SEED, tracing=True)
    assert drawn.plan, "the seed should inject some faults"
    replayed = run(SEED, plan=from_json(to_json(drawn.plan)), tracing=True)
    assert replayed.lines == drawn.lines


def test_a_decision_is_addressed_by_kind_site_and_ordinal_not_by_draw_order():
    rates = {"a": 0.5, "b": 0.5}
    drawn = FaultPlan(3, rates)
    asked = [(kind, site) for _ in range(20) for kind in "ab" for site in ("x", "y")]
    answers = [drawn.decide(kind, site, lambda rng: {"v": rng.random()}) for kind, site in asked]
    assert any(answers) and not all(answers)
    removed = next(address for address in drawn.decisions if address[0] == "a")
    kept = {address: params for address, params in drawn.decisions.items() if address != removed}
    replayed = FaultPlan(3, rates, kept)
    again = [replayed.decide(kind, site, lambda rng: {"v": rng.random()}) for kind, site in asked]
    differing = [i for i, (one, two) in enumerate(zip(answers, again, strict=True)) if one != two]
    assert len(differing) == 1 and again[differing[0]] is None


def test_each_fault_kind_draws_from_its_own_stream():
    alone = FaultPlan(5, {"a": 0.5})
    mixed = FaultPlan(5, {"a": 0.5, "b": 0.9})
    for _ in range(30):
        mixed.decide("b", "x", lambda rng: {})
    seen = [alone.decide("a", "x", lambda rng: {}) is None for _ in range(30)]
    assert seen == [mixed.decide("a", "x", lambda rng: {}) is None for _ in range(30)]


def test_a_plan_stops_deciding_faults_once_inactive():
    plan = FaultPlan(1, {"a": 1.0})
    assert plan.decide("a", "x", lambda rng: {}) == {}
    plan.active = False
    assert plan.decide("a", "x", lambda rng: {}) is None
    assert plan.injected["a"] == 1
