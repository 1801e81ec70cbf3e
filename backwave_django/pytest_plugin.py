"""pytest fixtures for projects that use backwave-django (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def backwave_pump(db: Any) -> Iterator[Any]:
    """A fresh deterministic :class:`~backwave_django.testing.TestPump` on a virtual clock."""
    from .testing import TestPump

    with TestPump() as pump:
        yield pump
