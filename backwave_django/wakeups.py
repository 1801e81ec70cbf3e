"""In-process wake-up hints: an enqueue that commits wakes the Pumps of this process that serve its queue.

Hints only cut latency; polling is what guarantees that work is found. On PostgreSQL, Pumps in other
processes are woken by LISTEN/NOTIFY as well (``shell/listener.py``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable

_lock = threading.Lock()
_subscribers: dict[int, tuple[frozenset[str], Callable[[], None]]] = {}
_next_token = 0


def subscribe(queues: Iterable[str], wake: Callable[[], None]) -> int:
    """Call ``wake()`` whenever a job becomes due now in one of ``queues``. Returns a token to unsubscribe."""
    global _next_token
    with _lock:
        _next_token += 1
        _subscribers[_next_token] = (frozenset(queues), wake)
        return _next_token


def unsubscribe(token: int) -> None:
    with _lock:
        _subscribers.pop(token, None)


def publish(queues: Iterable[str]) -> None:
    """Wake every subscriber serving one of ``queues``. Never raises into the caller."""
    wanted = set(queues)
    with _lock:
        targets = [wake for served, wake in _subscribers.values() if served & wanted]
    for wake in targets:
        with contextlib.suppress(Exception):  # best-effort: a broken subscriber must not fail an enqueue
            wake()
