"""The stores' fast copy of a frozen value means what dataclasses.replace means."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from datetime import timedelta

import pytest

from backwave_django.core.states import State
from backwave_django.store.contract import JobView, LeaseView
from backwave_django.store.copies import replace

from ..conftest import T0

JOB = JobView(
    id=7, wire_name="tests.tick", queue="default", payload="{}", state=State.SCHEDULED, attempt=0,
    max_attempts=3, due_at=T0, created_at=T0, terminal_at=None, terminal_cause="", cancel_requested=False,
    timeout=None, schedule="hourly", scheduled_for=T0,
)  # fmt: skip


def test_a_copy_with_changes_equals_the_one_dataclasses_makes_and_leaves_the_original_alone():
    copy = replace(JOB, state=State.LEASED, attempt=1)
    assert copy == dataclasses.replace(JOB, state=State.LEASED, attempt=1)
    assert type(copy) is JobView and (JOB.state, JOB.attempt) == (State.SCHEDULED, 0)
    assert replace(JOB) == JOB and replace(JOB) is not JOB
    lease = LeaseView(job_id=7, queue="default", owner="w", attempt=1, claimed_at=T0, expires_at=T0)
    assert replace(lease, expires_at=T0 + timedelta(minutes=1)).expires_at == T0 + timedelta(minutes=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.attempt = 2  # type: ignore[misc]


def test_a_name_that_is_not_a_field_is_refused_as_dataclasses_refuses_it():
    with pytest.raises(TypeError):
        replace(JOB, stat=State.LEASED)


@dataclass(frozen=True, slots=True)
class Checked:
    size: int

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("negative")


@dataclass(frozen=True)
class Unslotted:
    size: int
    seen: list[int] = field(default_factory=list, init=False)


@dataclass(frozen=True, slots=True)
class WithInitVar:
    size: int
    scale: InitVar[int] = 1


def test_a_value_whose_init_does_more_than_set_its_fields_is_copied_through_its_init():
    with pytest.raises(ValueError, match="negative"):
        replace(Checked(1), size=-1)
    assert replace(Unslotted(1), size=2) == Unslotted(2)
    assert replace(WithInitVar(1), size=2) == WithInitVar(2)
