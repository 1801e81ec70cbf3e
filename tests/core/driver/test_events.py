"""The one entry point: every event type is in the tests' list of them, and anything else is refused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pytest

from backwave_django.core import events as ev

from .helpers import EVERY_EVENT, T0, driver


def test_every_event_type_is_listed_once():
    assert {type(e) for e in EVERY_EVENT} == set(ev.Event.__args__)
    assert len(EVERY_EVENT) == len(ev.Event.__args__)


@dataclass(frozen=True)
class GraceExpired:
    """An event of an older Driver: it has a time, but the Driver no longer knows it."""

    now: datetime


def test_an_event_the_driver_does_not_know_is_a_type_error():
    with pytest.raises(TypeError, match=r"unknown event: GraceExpired\(now="):
        driver().step(GraceExpired(now=T0))  # type: ignore[arg-type]
