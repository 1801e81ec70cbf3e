"""Dispatch policies: which queues a claim asks for, in which order, and how many jobs from each."""

from __future__ import annotations

from collections import Counter

import pytest

from backwave_django.core.dispatch import PlannedClaim, Strict, Weighted

# -- Strict -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        pytest.param((), "needs at least one queue", id="no queue"),
        pytest.param(("a", "b", "a"), r"lists a queue twice: \('a', 'b', 'a'\)", id="a queue twice"),
    ],
)
def test_strict_rejects_a_bad_queue_list(queues, message):
    with pytest.raises(ValueError, match=message):
        Strict(queues)


def test_strict_plans_one_claim_over_every_queue_in_priority_order():
    policy = Strict(("high", "mid", "low"))
    assert policy.served_queues == ("high", "mid", "low")
    assert policy.plan(5) == [PlannedClaim(queues=("high", "mid", "low"), max_jobs=5)]


@pytest.mark.parametrize("available", [0, -1])
def test_strict_plans_nothing_without_a_free_slot(available):
    assert Strict(("a",)).plan(available) == []


def test_strict_keeps_no_credit():
    policy = Strict(("a", "b"))
    policy.charge(PlannedClaim(queues=("a", "b"), max_jobs=3))
    assert policy.plan(3) == [PlannedClaim(queues=("a", "b"), max_jobs=3)]


# -- Weighted: validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        pytest.param((), "needs at least one queue", id="no queue"),
        pytest.param((("a", 1), ("a", 2)), r"lists a queue twice: \['a', 'a'\]", id="a queue twice"),
        pytest.param(
            (("a", 1), ("b", 0)), "queue 'b' has weight 0; weights must be at least 1", id="weight 0"
        ),
        pytest.param((("a", -3),), "queue 'a' has weight -3", id="negative weight"),
    ],
)
def test_weighted_rejects_bad_weights(weights, message):
    with pytest.raises(ValueError, match=message):
        Weighted(weights)


def test_weighted_serves_its_queues_in_declaration_order_and_starts_without_credit():
    policy = Weighted((("b", 1), ("a", 5)))
    assert policy.served_queues == ("b", "a")
    assert policy.credits == {"b": 0, "a": 0}


# -- Weighted: shares -------------------------------------------------------------------------------------

WEIGHTS_6_3_1 = (("a", 6), ("b", 3), ("c", 1))


def issue_everything(policy: Weighted, available: int, polls: int) -> list[str]:
    """Poll ``polls`` times with ``available`` free slots, issuing every planned claim; the slot winners."""
    slots: list[str] = []
    for _ in range(polls):
        for claim in policy.plan(available):
            policy.charge(claim)
            slots += [claim.queues[0]] * claim.max_jobs
    return slots


def test_weights_6_3_1_give_exact_shares_over_single_slot_polls():
    slots = issue_everything(Weighted(WEIGHTS_6_3_1), available=1, polls=1000)
    assert Counter(slots) == {"a": 600, "b": 300, "c": 100}
    # smooth: every run of ten consecutive claims already holds the exact shares
    for start in range(0, 1000, 10):
        assert Counter(slots[start : start + 10]) == {"a": 6, "b": 3, "c": 1}


def test_weighted_interleaves_queues_smoothly_rather_than_in_blocks():
    slots = issue_everything(Weighted(WEIGHTS_6_3_1), available=1, polls=10)
    assert "".join(slots) == "abaabacaba"


@pytest.mark.parametrize("available", [2, 7, 10, 13])
def test_weights_6_3_1_give_exact_shares_when_every_claim_of_a_pass_is_issued(available):
    slots = issue_everything(Weighted(WEIGHTS_6_3_1), available=available, polls=100)
    assert Counter(slots) == {"a": 60 * available, "b": 30 * available, "c": 10 * available}


def test_weighted_dispatch_is_deterministic():
    first = issue_everything(Weighted(WEIGHTS_6_3_1), available=3, polls=200)
    second = issue_everything(Weighted(WEIGHTS_6_3_1), available=3, polls=200)
    assert first == second


def test_a_single_weighted_queue_takes_every_slot():
    policy = Weighted((("only", 4),))
    assert policy.plan(5) == [PlannedClaim(queues=("only",), max_jobs=5)]


# -- Weighted: planning, charging and the fallthrough order -----------------------------------------------


def test_planning_charges_no_credit():
    policy = Weighted(WEIGHTS_6_3_1)
    first = policy.plan(10)
    assert policy.credits == {"a": 0, "b": 0, "c": 0}
    assert policy.plan(10) == first


@pytest.mark.parametrize("available", [0, -2])
def test_weighted_plans_nothing_without_a_free_slot(available):
    assert Weighted(WEIGHTS_6_3_1).plan(available) == []


def test_each_claim_asks_for_its_queue_first_then_the_others_in_declaration_order():
    assert Weighted(WEIGHTS_6_3_1).plan(10) == [
        PlannedClaim(queues=("a", "b", "c"), max_jobs=6),
        PlannedClaim(queues=("b", "a", "c"), max_jobs=3),
        PlannedClaim(queues=("c", "a", "b"), max_jobs=1),
    ]


def test_a_single_slot_goes_to_the_winner_with_the_others_as_fallthrough():
    policy = Weighted((("a", 1), ("b", 1), ("c", 5)))
    assert policy.plan(1) == [PlannedClaim(queues=("c", "a", "b"), max_jobs=1)]


def test_ties_go_to_the_earlier_declared_queue():
    policy = Weighted((("x", 2), ("y", 2)))
    assert policy.plan(1) == [PlannedClaim(queues=("x", "y"), max_jobs=1)]


def test_a_dropped_batch_keeps_its_credit_and_wins_the_next_poll():
    policy = Weighted((("a", 1), ("b", 1)))
    first, dropped = policy.plan(2)
    assert (first.queues, dropped.queues) == (("a", "b"), ("b", "a"))
    policy.charge(first)  # the first claim came back empty: the pass ends and b's batch is never issued
    assert policy.credits == {"a": -1, "b": 1}
    assert policy.plan(1) == [PlannedClaim(queues=("b", "a"), max_jobs=1)]


def test_credit_is_charged_only_for_claims_actually_issued():
    partly = Weighted(WEIGHTS_6_3_1)
    first, *_dropped = partly.plan(10)
    partly.charge(first)

    fully = Weighted(WEIGHTS_6_3_1)
    for claim in fully.plan(10):
        fully.charge(claim)

    assert fully.credits == {"a": 0, "b": 0, "c": 0}  # a whole 6:3:1 round leaves no debt
    assert partly.credits != fully.credits
    assert partly.credits["c"] == 6  # c's dropped batch was not charged: its credit grew while a ran
    assert partly.plan(1)[0].queues[0] == "c"


def test_credit_is_capped_at_the_total_weight():
    policy = Weighted((("a", 1), ("b", 3)))
    # slot 1: a=1, b=3, b wins (b=-1); slot 2: a=2, b=2, a wins the tie (a=-2);
    # slot 3: a=-1, b=5 capped at 4, b wins (b=0). Without the cap b would end on 1.
    policy.charge(PlannedClaim(queues=("a", "b"), max_jobs=3))
    assert policy.credits == {"a": -1, "b": 0}


def test_credits_are_a_copy():
    policy = Weighted(WEIGHTS_6_3_1)
    policy.credits["a"] = 99
    assert policy.credits["a"] == 0
