"""Frozen values quick to build: ``@value`` makes the same instances a frozen, slotted, keyword-only dataclass
makes, and :func:`replace` means what dataclasses.replace means."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.core.values import replace, value

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@value
class Lease:
    job_id: int
    expires_at: datetime


@value
class Job:
    id: int
    state: str
    attempt: int = 0
    lease: Lease | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """What ``Job`` would be as a plain dataclass."""

    id: int
    state: str
    attempt: int = 0
    lease: Lease | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


JOB = Job(id=7, state="scheduled", lease=Lease(job_id=7, expires_at=T0))


def test_a_value_is_built_as_its_dataclass_would_be():
    assert dataclasses.astuple(JOB) == dataclasses.astuple(
        Reference(id=7, state="scheduled", lease=JOB.lease)
    )
    assert Job(id=7, state="scheduled", attempt=0, lease=JOB.lease, tags=()) == JOB
    assert hash(JOB) == hash(Job(id=7, state="scheduled", lease=JOB.lease))
    assert Job(id=1, state="x", tags=("a",)).tags == ("a",) and Job(id=1, state="x").tags == ()
    assert repr(JOB).startswith("Job(id=7, state='scheduled', attempt=0")
    assert not hasattr(JOB, "__dict__")  # slotted
    with pytest.raises(dataclasses.FrozenInstanceError):
        JOB.attempt = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((7,), {"state": "x"}), ((), {"state": "x"}), ((), {"id": 7, "state": "x", "queue": "q"})],
    ids=["positional", "missing", "unknown"],
)
def test_a_value_refuses_the_calls_its_dataclass_refuses(args, kwargs):
    with pytest.raises(TypeError):
        Job(*args, **kwargs)
    with pytest.raises(TypeError):
        Reference(*args, **kwargs)


def test_a_value_with_no_fields_is_built_too():
    @value
    class Empty:
        pass

    assert Empty() == Empty() and repr(Empty()) == "test_a_value_with_no_fields_is_built_too.<locals>.Empty()"


@value
class Checked:
    size: int

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError("negative")


def test_a_value_whose_init_does_more_keeps_the_dataclass_init():
    with pytest.raises(ValueError, match="negative"):
        Checked(size=-1)
    assert Checked(size=1).size == 1


def test_a_copy_with_changes_equals_the_one_dataclasses_makes_and_leaves_the_original_alone():
    copy = replace(JOB, state="leased", attempt=1)
    assert copy == dataclasses.replace(JOB, state="leased", attempt=1)
    assert type(copy) is Job and (JOB.state, JOB.attempt) == ("scheduled", 0)
    assert replace(JOB) == JOB and replace(JOB) is not JOB
    assert JOB.lease is not None
    later = replace(JOB.lease, expires_at=T0 + timedelta(minutes=1))
    assert later.expires_at == T0 + timedelta(minutes=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.attempt = 2  # type: ignore[misc]


def test_a_name_that_is_not_a_field_is_refused_as_dataclasses_refuses_it():
    with pytest.raises(TypeError):
        replace(JOB, stat="leased")


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
        replace(Checked(size=1), size=-1)
    assert replace(Unslotted(1), size=2) == Unslotted(2)
    assert replace(WithInitVar(1), size=2) == WithInitVar(2)
