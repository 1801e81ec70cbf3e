"""Faults: which errors a store calls transient (degrade and retry, not halt), and cutting off the sessions of
a handler that was given up on (a store that shares none with handlers does nothing)."""

from __future__ import annotations

import pytest

from backwave_django.core.transitions import IllegalTransition
from backwave_django.store.contract import PayloadTooLarge, StoreError
from backwave_django.store.memory import TransientFault

from .support import claim, enqueue, snapshot

BUGS = {
    "value-error": ValueError("a bug"),
    "key-error": KeyError("a bug"),
    "store-error": StoreError("refused"),
    "payload-too-large": PayloadTooLarge("too big"),
    "illegal-transition": IllegalTransition("a job cannot move from leased to awaiting_parent"),
}


@pytest.mark.parametrize("error", BUGS.values(), ids=BUGS.keys())
def test_a_bug_or_a_refusal_is_never_a_transient_fault(store, error):
    assert store.is_transient_fault(error) is False


def test_a_lost_connection_is_a_transient_fault(store):
    assert store.is_transient_fault(TransientFault("connection lost")) is True


def test_cutting_off_no_sessions_changes_nothing(store):
    enqueue(store, 2)
    claim(store, max_jobs=1)
    before = snapshot(store)

    store.cut_off_sessions([])

    assert snapshot(store) == before
