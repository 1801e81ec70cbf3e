"""PostgreSQL's claim of one queue in one round-trip: the queue's advisory lock, its settings and the guarded
claim, sent together, which the server runs as one transaction.

The claim of a group with one queue (the default group's) used to take five round-trips: BEGIN, the lock and
settings, a look for due work, the claim, COMMIT; under a backlog the Pump spent most of its time waiting on
them. Sent together, the two statements still run as they did inside ``atomic``: the shared advisory lock is
taken first and held to the end of the (implicit) transaction, and in READ COMMITTED the claim statement takes
its snapshot after the lock was granted, so it sees every operator change that held the exclusive lock before
it (a pause committed before the claim is seen by the claim's guard).

They go as one pipeline of two prepared statements (the server commits the implicit transaction at the
pipeline's Sync): planning the claim was most of its server time, 0.29 ms against 0.07 ms executing it. Where
psycopg's libpq cannot send pipelines (before libpq 14), they go as one simple query of two statements, bound
on the client, planned every time.

What the statements leave to the ORM path: a queue with a concurrency limit (the guard makes the claim take
nothing, and the claim is made again under the settings row lock) and a caller's open transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db.backends.utils import CursorWrapper

from ..core.records import ClaimedJob
from . import changes

if TYPE_CHECKING:
    from .postgres import PostgresStore

#: The queue's advisory lock (shared; operator changes take it exclusive) and its settings, if it has any.
LOCK_AND_READ_ONE = """
SELECT pg_advisory_xact_lock_shared(%(class)s, hashtext(%(queue)s))::text, s.paused, s.concurrency_limit
FROM (SELECT 1) AS one LEFT JOIN backwave_django_queuesettings s ON s.queue = %(queue)s
"""


@functools.cache
def _client_cursor() -> Any:
    import psycopg

    return psycopg.ClientCursor


def claim_one_queue(
    store: PostgresStore, worker_id: str, queue: str, take: int, lease_duration: timedelta, now: datetime
) -> tuple[bool, list[ClaimedJob]]:
    """Claim up to ``take`` jobs of ``queue`` in one round-trip. Returns (limited, jobs): limited is True when
    the queue has a concurrency limit and is not paused, and then nothing was claimed."""
    from .postgres import ADVISORY_CLASS, CLAIM_UNLIMITED_QUEUE, pipelines

    changes.claimable_state()  # the state the statement picks from: its move to leased is still legal
    params = {
        "class": ADVISORY_CLASS,
        "queue": queue,
        "now": now,
        "take": take,
        "owner": worker_id,
        "expires": now + lease_duration,
    }
    if pipelines():
        statements = [(LOCK_AND_READ_ONE, params), (CLAIM_UNLIMITED_QUEUE, params)]
        settings, rows = store._results(statements, prepare=True)
    else:
        settings, rows = _one_query(store, f"{LOCK_AND_READ_ONE};{CLAIM_UNLIMITED_QUEUE}", params)
    _, paused, limit = settings[0]
    limited = limit is not None and not paused
    if limited and rows:  # the guard leaves a limited queue to the ORM path: only a bug gets here
        raise AssertionError(f"the one-round-trip claim took jobs of the limited queue {queue!r}")
    return limited, [changes.claimed_job(row) for row in rows]


def _one_query(store: PostgresStore, sql: str, params: dict[str, Any]) -> Sequence[list[tuple[Any, ...]]]:
    store.connection.ensure_connection()
    with CursorWrapper(_client_cursor()(store.connection.connection), store.connection) as cursor:
        cursor.execute(sql, params)
        first = list(cursor.fetchall())
        cursor.cursor.nextset()
        return first, list(cursor.fetchall())
