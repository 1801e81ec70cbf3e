"""The self-test: every planted bug is caught within the CI's seeds, by a seed that is clean without it.

``SEEDS`` is what ``python -m backwave_django.simulation --self-test`` prints: the first CI seed that
catches each planted bug. A change to the simulator that moves them updates this table (the self-test in
``scripts/test`` hunts through all 2,000 seeds; this keeps the test suite fast).
"""

from __future__ import annotations

import pytest

from backwave_django.simulation.plants import PLANTS, hunt
from backwave_django.simulation.run import run

SEEDS = {
    "fence-ignores-attempt": (111, "OutcomeFromLeaseHolder"),
    "claim-forgets-reservations": (10, "PumpPoolBound"),
    "deadlines-outlive-attempts": (0, "DeadlinesFollowAttempts"),
    "sweep-ignores-max-attempts": (17, "AttemptCeiling"),
    "release-charges-attempt": (61, "AttemptAccounting"),
    "paused-queue-claimed": (3, "PausedQueueNotClaimed"),
    "mint-ignores-cursor": (2, "TickAccounting"),
    "purge-by-age": (3, "PurgeOnlyFinished"),
    "no-overlap-forgets-live-runs": (2, "NoOverlap"),
    "coalesce-makes-up-every-tick": (27, "CoalesceOneMakeUp"),
    "claim-ignores-priority": (4, "ClaimOrder"),
    "unique-key-forgets-leased": (1, "UniqueKeyHeldOnce"),
    "output-ignores-fence": (134, "OutputFromSuccess"),
    "tags-ignore-fence": (28, "TagsFromFencedOutcome"),
    "failure-releases-children": (24, "ChildAfterParents"),
    "starved-by-any-full-claim": (56, "PumpsGrowOnlyWhenStarved"),
    "lingers-while-any-runs": (3, "OutcomesLingerBounded"),
}
BY_NAME = {plant.name: plant for plant in PLANTS}


def test_the_planted_bugs_are_the_ones_the_self_test_must_catch():
    assert sorted(BY_NAME) == sorted(SEEDS)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_a_planted_bug_is_caught_by_its_seed_and_only_because_of_it(name):
    seed, invariant = SEEDS[name]
    caught = run(seed, plant=BY_NAME[name])
    assert caught.violation is not None and caught.violation.name == invariant
    assert run(seed).violation is None


def test_the_hunt_stops_at_the_first_seed_that_catches():
    name = "paused-queue-claimed"
    seed, _ = SEEDS[name]
    catch = hunt(BY_NAME[name], range(seed, seed + 50))
    assert catch.outcome is not None and catch.outcome.seed == seed
    assert (catch.tried, catch.clean_without) == (1, True)
