"""A database alias added for one test and removed after it, without overriding ``DATABASES`` (which Django
warns against): the entry goes into the dict Django's connection handler reads, and out again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections


@contextmanager
def database_alias(alias: str, **changes: Any) -> Iterator[str]:
    """``alias``: a copy of ``default``'s settings (the test database) with ``changes`` (HOST, PORT, ...)."""
    assert alias not in connections.settings, f"{alias!r} is already a database alias"
    connections.settings[alias] = {**connections["default"].settings_dict, **changes}
    try:
        yield alias
    finally:
        for wrapper in connections.all(initialized_only=True):
            if wrapper.alias == alias:
                wrapper.close()
        if hasattr(connections._connections, alias):
            delattr(connections._connections, alias)
        del connections.settings[alias]
