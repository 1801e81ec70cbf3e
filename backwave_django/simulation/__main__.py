"""``python -m backwave_django.simulation``: run seeds, replay one, hunt forever, or run the self-test.

    --seeds N [--first S]     run N seeds (default 300) and print one summary line
    --seed S [--trace]        replay one seed exactly (and print its event trace)
    --replay FILE             replay a regression file: its pinned scenario and minimized fault plan (traced)
    --rerecord FILE           a kept seed no longer finds its bug with its fix undone: find it again
    --forever [--first S]     draw seeds until interrupted; each failure is minimized and written to
                              --regressions (default tests/simulation/regressions/<seed>.json)
    --self-test               plant each known bug in turn and show which seed catches it (within --seeds)
    --plant NAME              with --seeds, --seed or --replay: run with a planted bug, or a fix undone

A failure prints the seed, the invariant it broke and the shortest trace the minimizer found, writes that
shortest run to a file ``--replay`` reads, and exits 1. The elapsed time printed is read from ``os.times()``
for the summary only; no run reads a clock.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from . import regressions
from .minimize import minimize
from .plants import PLANTS, self_test
from .reverted import REVERTED
from .run import Outcome, Plant, run
from .scenario import FAULT_BANDS

DEFAULT_SEEDS = 300
CI_SEEDS = 2000  # what scripts/test runs; the self-test hunts within it
REGRESSIONS = Path("tests/simulation/regressions")
#: Where a failure's shortest run is written for ``--replay``.
FAILURES = Path(tempfile.gettempdir()) / "backwave-simulation"
#: A rate is printed only for a batch that took at least this long (os.times() counts in hundredths).
MEASURABLE = 0.1


class Tally:
    def __init__(self) -> None:
        self.seeds = self.steps = self.jobs = self.minted = self.purged = self.checks = self.failures = 0
        self.duplicates = 0
        self.faults: Counter[str] = Counter()
        self.started = os.times().elapsed

    def add(self, outcome: Outcome) -> None:
        self.seeds += 1
        self.steps += outcome.steps
        self.jobs += outcome.jobs
        self.minted += outcome.minted
        self.purged += outcome.purged
        self.duplicates += outcome.keys["duplicates"]
        self.checks += outcome.checks
        self.faults.update(outcome.faults)
        self.failures += outcome.failed

    def line(self) -> str:
        took = os.times().elapsed - self.started
        faults = " ".join(f"{kind}={self.faults[kind]}" for kind in FAULT_BANDS)
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        # One seed, or a batch too short to time, has no meaningful rate: its time alone is printed.
        rate = f", {self.seeds / took:.1f} seeds/s" if self.seeds > 1 and took >= MEASURABLE else ""
        return (
            f"simulation: {seeds}, {self.steps} steps, {self.jobs} jobs ({self.minted} minted by schedules, "
            f"{self.purged} purged; {self.duplicates} enqueues were duplicates), faults [{faults}], "
            f"{self.checks} invariant checks, "
            f"{self.failures} failed, "
            f"{took:.2f}s{rate}"
        )


def show_failure(failure: Outcome, *, minimized: bool = True, plant: Plant | None = None) -> Outcome:
    """Print the seed, the invariant and the shortest trace found; returns the run shown."""
    assert failure.violation is not None
    print(f"FAILED seed {failure.seed}: {failure.violation.name}: {failure.violation.message}")
    shown = minimize(failure, plant) if minimized else run(failure.seed, plant=plant, tracing=True)
    print(f"shortest trace ({len(shown.plan)} of {len(failure.plan)} fault decisions kept):")
    for (kind, site, ordinal), params in sorted(shown.plan.items()):
        print(f"  fault {kind} at {site} #{ordinal} {params}")
    print("\n".join(shown.lines))
    command = "python -m backwave_django.simulation"
    planted = f" --plant {plant.name}" if plant is not None else ""
    path = regressions.save(FAILURES, shown)
    print(f"replay this shortest run (its {len(shown.plan)} faults only): {command} --replay {path}{planted}")
    print(f"replay the whole seed (every fault it draws): {command} --seed {failure.seed} --trace{planted}")
    return shown


def run_seeds(first: int, count: int, minimized: bool, plant: Plant | None = None) -> int:
    tally = Tally()
    for seed in range(first, first + count):
        outcome = run(seed, plant=plant)
        tally.add(outcome)
        if outcome.failed:
            print(tally.line())
            show_failure(outcome, minimized=minimized, plant=plant)
            return 1
    print(tally.line())
    return 0


def run_one(seed: int, tracing: bool, minimized: bool, plant: Plant | None = None) -> int:
    tally = Tally()
    outcome = run(seed, plant=plant, tracing=tracing)
    if tracing:
        print("\n".join(outcome.lines))
    tally.add(outcome)
    print(tally.line())
    if outcome.failed:
        show_failure(outcome, minimized=minimized, plant=plant)
        return 1
    return 0


def replay(path: Path, plant: Plant | None = None) -> int:
    kept = regressions.load(path)
    outcome = run(kept.seed, scenario=kept.scenario, plan=kept.plan, plant=plant, tracing=True)
    print("\n".join(outcome.lines))
    verdict = f"FAILS: {outcome.violation}" if outcome.violation else "clean"
    print(f"{path}: seed {kept.seed} (was {kept.invariant}) replays {verdict}")
    return 1 if outcome.failed else 0


def rerecord(path: Path, seeds: int) -> int:
    """Find a kept seed's bug again with its fix undone: from its plan, from every fault its scenario draws,
    or else from the first of ``seeds`` seeds that trips the same invariant (a new file)."""
    kept = regressions.load(path)
    plant = REVERTED[kept.bug]

    def candidates() -> Iterator[Outcome]:
        yield run(kept.seed, scenario=kept.scenario, plan=kept.plan, plant=plant)  # its plan, as it is
        yield run(kept.seed, scenario=kept.scenario, plant=plant)  # every fault its scenario draws
        for seed in range(seeds):  # another seed
            yield run(seed, plant=plant)

    for found in candidates():
        if found.violation is None or found.violation.name != kept.invariant:
            continue
        shown = minimize(found, plant)
        written = regressions.save(path.parent, shown, note=kept.note, bug=kept.bug)
        print(
            f"{kept.bug}: seed {shown.seed} trips {kept.invariant} with {len(shown.plan)} faults: {written}"
        )
        if written != path:
            path.unlink()
            print(
                f"removed {path}: seed {kept.seed} no longer finds it (the docs name the seed: update them)"
            )
        return 0
    print(f"{kept.bug}: no run trips {kept.invariant} any more: hunt with --forever against the plant")
    return 1


def forever(first: int, folder: Path) -> int:
    tally, seed = Tally(), first
    try:
        while True:
            outcome = run(seed)
            tally.add(outcome)
            if outcome.failed:
                shown = show_failure(outcome)
                print(f"written {regressions.save(folder, shown)}")
            if tally.seeds % 1000 == 0:
                print(tally.line(), flush=True)
            seed += 1
    except KeyboardInterrupt:
        print(tally.line())
    return 1 if tally.failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backwave_django.simulation", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=None, help=f"seeds to run (default {DEFAULT_SEEDS})")
    parser.add_argument(
        "--first", type=int, default=None, help="the first seed (default 0; --forever: random)"
    )
    parser.add_argument("--seed", type=int, default=None, help="replay this one seed")
    parser.add_argument("--trace", action="store_true", help="with --seed: print its event trace")
    parser.add_argument("--replay", type=Path, default=None, help="replay a regression file")
    parser.add_argument("--rerecord", type=Path, default=None, help="find a kept seed's bug again")
    parser.add_argument("--forever", action="store_true", help="draw seeds until interrupted")
    parser.add_argument("--self-test", action="store_true", help="catch each planted bug")
    parser.add_argument("--regressions", type=Path, default=REGRESSIONS, help="where --forever writes")
    parser.add_argument("--no-minimize", action="store_true", help="show a failure's full trace at once")
    known = {plant.name: plant for plant in (*PLANTS, *REVERTED.values())}
    parser.add_argument("--plant", choices=sorted(known), default=None, help="run with this bug planted")
    args = parser.parse_args(argv)
    minimized = not args.no_minimize
    plant = known[args.plant] if args.plant else None
    if args.replay is not None:
        return replay(args.replay, plant)
    if args.rerecord is not None:
        return rerecord(args.rerecord, args.seeds or CI_SEEDS)
    if args.seed is not None:
        return run_one(args.seed, args.trace, minimized, plant)
    if args.forever:
        first = args.first if args.first is not None else int.from_bytes(os.urandom(4), "big")
        return forever(first, args.regressions)
    first = args.first or 0
    if args.self_test:
        count = args.seeds or CI_SEEDS
        started = os.times().elapsed
        passed = self_test(range(first, first + count), lambda line: print(line, flush=True))
        print(f"self-test: {'passed' if passed else 'FAILED'} in {os.times().elapsed - started:.1f}s")
        return 0 if passed else 1
    return run_seeds(first, args.seeds or DEFAULT_SEEDS, minimized, plant)


if __name__ == "__main__":
    sys.exit(main())
