"""Store operations run again when the database broke a deadlock by rolling their transaction back.

Every path locks job rows in ascending id order (see ``store.edges``), but two transactions that end parents
can still meet: a cancellation cascade locks its children's children after its first ordered lock, and on
MariaDB InnoDB locks every row a statement scans. The database then rolls one transaction back whole
(PostgreSQL SQLSTATE ``40P01``, MariaDB error 1213) and asks for it again. The store does so itself, after a
short random pause, up to :data:`DEADLOCK_RETRIES` times, for an operation that runs in a transaction of its
own; inside a caller's transaction the caller gets the error, since its transaction is gone. A retried
operation starts from nothing: what the rolled-back run wrote was never committed, so an edge still resolves
exactly once.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Concatenate, Protocol

from django.db import DatabaseError

from . import faults

logger = logging.getLogger("backwave.store")

#: PostgreSQL's "deadlock detected", and InnoDB's "Deadlock found when trying to get lock".
POSTGRES_DEADLOCK = "40P01"
MYSQL_DEADLOCK = 1213
#: Runs of one operation that a deadlock may roll back before the error reaches the caller, and the longest
#: pause before a run again (a random part of 1 ms, 2 ms, 4 ms, ... up to this), so that the same workers do
#: not meet again in the same order.
DEADLOCK_RETRIES = 10
DEADLOCK_PAUSE_CAP = 0.05


class _Store(Protocol):
    @property
    def connection(self) -> Any: ...


def is_deadlock(exc: BaseException) -> bool:
    return faults.sqlstate(exc) == POSTGRES_DEADLOCK or faults.mysql_code(exc) == MYSQL_DEADLOCK


def restarted_on_deadlock[S: _Store, **P, R](
    operation: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], R]:
    """``operation`` run again when the database rolled its transaction back to break a deadlock, unless it
    runs inside the caller's transaction. Wrapping an operation already wrapped changes nothing."""
    if getattr(operation, "restarts_on_deadlock", False):
        return operation

    @functools.wraps(operation)
    def run(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, DEADLOCK_RETRIES + 1):
            try:
                return operation(store, *args, **kwargs)
            except DatabaseError as exc:
                own = not store.connection.in_atomic_block
                if not own or attempt == DEADLOCK_RETRIES or not is_deadlock(exc):
                    raise
                logger.info("%s was chosen to break a deadlock; running it again", operation.__name__)
                time.sleep(random.uniform(0, min(DEADLOCK_PAUSE_CAP, 0.001 * 2**attempt)))
        raise AssertionError("unreachable")  # pragma: no cover  (the loop returns or raises)

    run.restarts_on_deadlock = True  # type: ignore[attr-defined]
    return run
