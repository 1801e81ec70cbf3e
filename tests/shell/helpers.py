"""Helpers for the threaded Pump tests: run a node with given settings, wait for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from backwave_django.shell.node import Node


def worker_database_url() -> str:
    """A DATABASE_URL naming this test's database, for worker processes the test starts."""
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    if connection.vendor == "mysql":
        return f"mysql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    return f"sqlite:///{db['NAME']}"


def wait_until(condition: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02) -> Any:
    """Poll ``condition`` until it is truthy; fail the test with a clear message after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {condition.__doc__ or condition}")
        time.sleep(interval)


def group(**overrides: Any) -> dict[str, Any]:
    """A fast group for tests: short polls, leases and heartbeats."""
    return {"QUEUES": ["default"], "POLL_INTERVAL": 0.05, "MAINTENANCE_INTERVAL": 0.2, **overrides}


@contextmanager
def running(
    settings: Any,
    groups: dict[str, dict[str, Any]],
    *,
    grace: float = 5.0,
    more: dict[str, Any] | None = None,
    **node_options: Any,
) -> Iterator[Node]:
    """Start a node serving ``groups`` (the BACKWAVE GROUPS setting, with ``more`` keys) and drain it on
    exit."""
    retry = {"BACKOFF_BASE": 1.0, "BACKOFF_CAP": 0.2}
    settings.BACKWAVE = {"GROUPS": groups, "RETRY": retry, **(more or {})}
    node = Node(list(groups), reconnect_delay=0.2, **node_options)
    node.start()
    try:
        yield node
    finally:
        node.stop(grace)
        connection.close()
