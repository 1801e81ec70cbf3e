"""Job states and the table of legal transitions."""

from __future__ import annotations

import itertools

import pytest

from backwave_django.core.states import INITIAL_STATES, TERMINAL_STATES, TRANSITIONS, State, is_legal

S = State
LEGAL_EDGES = {
    (S.AWAITING_PARENT, S.SCHEDULED),
    (S.AWAITING_PARENT, S.CANCELLED),
    (S.SCHEDULED, S.LEASED),
    (S.SCHEDULED, S.CANCELLED),
    (S.LEASED, S.SUCCEEDED),
    (S.LEASED, S.SCHEDULED),
    (S.LEASED, S.DEAD_LETTERED),
    (S.LEASED, S.CANCELLED),
    (S.LEASED, S.QUARANTINED),
    (S.DEAD_LETTERED, S.SCHEDULED),
    (S.QUARANTINED, S.SCHEDULED),
}
ILLEGAL_PAIRS = sorted(set(itertools.product(State, repeat=2)) - LEGAL_EDGES)


def test_there_are_exactly_eleven_legal_edges():
    assert len(LEGAL_EDGES) == 11
    assert set(TRANSITIONS) == LEGAL_EDGES


@pytest.mark.parametrize(("before", "after"), sorted(LEGAL_EDGES), ids="{0[0]}->{0[1]}".format)
def test_every_legal_edge_is_allowed_and_says_who_makes_it(before, after):
    assert is_legal(before, after)
    assert TRANSITIONS[before, after].strip()


def test_every_other_pair_of_states_is_rejected():
    assert [pair for pair in ILLEGAL_PAIRS if is_legal(*pair)] == []


def test_every_pair_of_states_is_either_legal_or_rejected():
    assert len(LEGAL_EDGES) + len(ILLEGAL_PAIRS) == len(State) ** 2 == 49


def test_the_terminal_states():
    assert {S.SUCCEEDED, S.CANCELLED, S.DEAD_LETTERED, S.QUARANTINED} == TERMINAL_STATES
    assert {s for s in State if s.is_terminal} == TERMINAL_STATES
    assert not any(s.is_terminal for s in (S.SCHEDULED, S.AWAITING_PARENT, S.LEASED))


def test_a_job_may_be_born_scheduled_awaiting_its_parents_or_cancelled():
    assert {S.SCHEDULED, S.AWAITING_PARENT, S.CANCELLED} == INITIAL_STATES


def test_succeeded_and_cancelled_are_final():
    assert not [edge for edge in TRANSITIONS if edge[0] in (S.SUCCEEDED, S.CANCELLED)]


def test_only_an_operator_requeue_leaves_a_terminal_state_and_it_goes_back_to_scheduled():
    leaving = {edge for edge in TRANSITIONS if edge[0].is_terminal}
    assert leaving == {(S.DEAD_LETTERED, S.SCHEDULED), (S.QUARANTINED, S.SCHEDULED)}


def test_no_state_moves_to_itself():
    assert not [s for s in State if is_legal(s, s)]


def test_only_a_claim_enters_leased():
    assert [edge for edge in TRANSITIONS if edge[1] is S.LEASED] == [(S.SCHEDULED, S.LEASED)]


def test_the_stored_values_are_stable():
    assert [s.value for s in State] == [
        "scheduled",
        "awaiting_parent",
        "leased",
        "succeeded",
        "cancelled",
        "dead_lettered",
        "quarantined",
    ]
