"""The PostgreSQL store: the Django store with its hot paths in single SQL statements.

Enqueue, claim, report, heartbeat and the batch state change behind expiry and release each cost one
statement (plus the transaction around it), whatever the batch size: no per-job round-trip and no model
instances on the claim and report paths. Everything else, and every decision about where a job goes next
(``_Change``), is shared with :class:`DjangoStore`, so both stores keep one set of semantics.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.db.backends.utils import CursorWrapper

from .. import conf, wakeups
from ..core.records import ClaimedJob, HeartbeatResult, OutcomeReport
from ..models import Job
from .contract import NewJob, ReportResult
from .django import ADVISORY_CLASS, HINT_CHANNEL, DjangoStore, _Change, _check_bounds, _truncate

#: What a pooler that cannot keep prepared statements (PgBouncer in transaction mode without
#: ``max_prepared_statements``) makes of ours: it hands the next statement another server connection.
POOLER_HINT = (
    "backwave prepares its enqueue statements; behind a connection pooler that cannot keep prepared "
    "statements (PgBouncer in transaction mode before 1.21, or without max_prepared_statements), set "
    "BACKWAVE['PREPARED_STATEMENTS'] = False."
)

ENQUEUE = """
WITH inserted AS (
    INSERT INTO backwave_django_job
        (wire_name, queue, payload, state, attempt, max_attempts, due_at, created_at, terminal_cause,
         cancel_requested)
    SELECT w, q, p, 'scheduled', 0, m, d, %s, '', false
    FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::timestamptz[])
        WITH ORDINALITY AS t(w, q, p, m, d, n)
    ORDER BY n
    RETURNING id
), hinted AS (
    SELECT pg_notify(%s, q) FROM unnest(%s::text[]) AS q
)
SELECT id, (SELECT count(*) FROM hinted) FROM inserted
"""

#: One job: a plain VALUES insert plans and runs faster than the unnest form.
ENQUEUE_ONE = """
WITH inserted AS (
    INSERT INTO backwave_django_job
        (wire_name, queue, payload, state, attempt, max_attempts, due_at, created_at, terminal_cause,
         cancel_requested)
    VALUES (%s, %s, %s, 'scheduled', 0, %s, %s, %s, '', false)
    RETURNING id
), hinted AS (
    SELECT pg_notify(%s, %s) WHERE %s
)
SELECT id, (SELECT count(*) FROM hinted) FROM inserted
"""

#: Takes each queue's advisory lock shared (operator changes take it exclusive) and reads its settings.
LOCK_AND_READ_SETTINGS = """
SELECT q, pg_advisory_xact_lock_shared(%s, hashtext(q)), s.paused, s.concurrency_limit
FROM unnest(%s::text[]) AS q LEFT JOIN backwave_django_queuesettings s ON s.queue = q
"""

#: One queue, no limit: pick, lease and log in one statement. The settings guard runs on this statement's
#: own snapshot, so a pause or limit committed after the read above is still honoured.
CLAIM_UNLIMITED_QUEUE = """
WITH picked AS (
    SELECT id FROM backwave_django_job
    WHERE state = 'scheduled' AND queue = %(queue)s AND due_at <= %(now)s
      AND NOT EXISTS (
          SELECT 1 FROM backwave_django_queuesettings s
          WHERE s.queue = %(queue)s AND (s.paused OR s.concurrency_limit IS NOT NULL)
      )
    ORDER BY due_at, id
    LIMIT %(take)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE backwave_django_job j SET state = 'leased', attempt = j.attempt + 1
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.wire_name, j.queue, j.payload, j.attempt, j.max_attempts, j.due_at
), leased AS (
    INSERT INTO backwave_django_lease (job_id, queue, owner, attempt, claimed_at, expires_at)
    SELECT id, queue, %(owner)s, attempt, %(now)s, %(expires)s FROM claimed
)
SELECT id, wire_name, queue, payload, attempt, max_attempts, due_at FROM claimed ORDER BY due_at, id
"""

#: Per-row changes as parallel arrays (see ``_Change``), for the statements below.
CHANGES = """
    SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(kinds)s::text[], %(states)s::text[],
                         %(dues)s::timestamptz[], %(causes)s::text[], %(details)s::text[], %(deltas)s::int[],
                         %(workers)s::text[])
        AS t(job_id, attempt, kind, state, due_at, cause, detail, delta, worker)
"""

_MOVE_AND_LOG = """
moved AS (
    UPDATE backwave_django_job j SET
        state = c.state,
        attempt = j.attempt + c.delta,
        due_at = CASE WHEN c.state = 'scheduled' THEN c.due_at ELSE j.due_at END,
        terminal_at = CASE WHEN c.state = 'scheduled' THEN NULL ELSE %(now)s END,
        terminal_cause = CASE WHEN c.state = 'scheduled' THEN j.terminal_cause ELSE c.cause END,
        cancel_requested = CASE WHEN c.state = 'scheduled' THEN j.cancel_requested ELSE false END
    FROM {source}
    WHERE j.id = c.job_id AND j.state = 'leased' {guard}
    RETURNING j.id
), logged AS (
    INSERT INTO backwave_django_outcome
        (job_id, attempt, worker, kind, state_after, message, detail, recorded_at)
    SELECT c.job_id, c.attempt, c.worker, c.kind, c.state, c.cause, c.detail, %(now)s
    FROM changes c JOIN moved m ON m.id = c.job_id
)
"""

#: Leases already deleted by the caller: move the jobs and write one Outcome each.
APPLY = (
    f"WITH changes AS ({CHANGES}),{_MOVE_AND_LOG.format(source='changes c', guard='')} SELECT id FROM moved"
)

#: The fenced report: delete the leases this worker still holds for these Attempts (live at ``now``), move
#: the jobs and log the outcomes. A failure of a job whose cancel was requested is left for the caller
#: (fenced but not moved), because it becomes a cancel rather than a retry.
REPORT = (
    f"WITH changes AS ({CHANGES}), fenced AS ("
    " DELETE FROM backwave_django_lease l USING changes c"
    " WHERE l.job_id = c.job_id AND l.attempt = c.attempt AND l.owner = %(owner)s AND l.expires_at > %(now)s"
    " RETURNING l.job_id),"
    + _MOVE_AND_LOG.format(
        source="changes c JOIN fenced f ON f.job_id = c.job_id",
        guard="AND NOT (j.cancel_requested AND c.kind = 'failed')",
    )
    + " SELECT 'fenced', job_id FROM fenced UNION ALL SELECT 'moved', id FROM moved"
)

HEARTBEAT = """
WITH renewed AS (
    UPDATE backwave_django_lease SET expires_at = %(expires)s
    WHERE owner = %(owner)s AND job_id = ANY(%(ids)s) AND expires_at > %(now)s
    RETURNING job_id
)
SELECT r.job_id, j.cancel_requested FROM renewed r JOIN backwave_django_job j ON j.id = r.job_id
"""


def _arrays(changes: Sequence[_Change]) -> dict[str, list[Any]]:
    return {
        "ids": [c.job_id for c in changes],
        "attempts": [c.attempt for c in changes],
        "kinds": [c.kind.value for c in changes],
        "states": [c.state.value for c in changes],
        "dues": [c.due_at for c in changes],
        "causes": [_truncate(c.cause, 2000) for c in changes],
        "details": [_truncate(c.detail) for c in changes],
        "deltas": [c.attempt_delta for c in changes],
        "workers": [c.worker for c in changes],
    }


@functools.cache
def _hot_cursor(prepare: bool) -> Any:
    """A psycopg cursor class (server-side binding) that always passes ``prepare`` to psycopg, which Django's
    cursor wrapper cannot. psycopg is imported on first use: SQLite-only projects need not install it."""
    import psycopg

    class HotCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, **{**kwargs, "prepare": prepare})

    return HotCursor


class PostgresStore(DjangoStore):
    """The Storage Contract on PostgreSQL, hot paths in SQL. Same semantics as :class:`DjangoStore`."""

    def _rows(self, sql: str, params: Any, *, prepare: bool = False) -> list[tuple[Any, ...]]:
        """Run one hot statement with server-side binding. It still goes through Django's cursor wrapper,
        so execute wrappers see it.

        ``prepare``: keep it prepared on this connection. Django turns psycopg's prepared statements off
        unless ``OPTIONS['prepare_threshold']`` says otherwise, so unless ``BACKWAVE['PREPARED_STATEMENTS']``
        is False the threshold is lifted for this one call (the project's own queries are untouched).
        Only the enqueue statements ask for it: planning is a third of a single enqueue's server time, and
        their plan is the same for every call. The claim and report plans depend on the batch size, and a
        prepared report (generic plan) was measured to cost a fifth of the drain rate, so they are never
        prepared, even where the project's ``prepare_threshold`` prepares everything else.
        """
        self.connection.ensure_connection()
        raw = self.connection.connection
        prepare = prepare and conf.get().prepared_statements
        lift = prepare and raw.prepare_threshold is None
        try:
            with CursorWrapper(_hot_cursor(prepare)(raw), self.connection) as cursor:
                if lift:
                    raw.prepare_threshold = 0
                try:
                    cursor.execute(sql, params)
                finally:
                    if lift:
                        raw.prepare_threshold = None
                return list(cursor.fetchall())
        except DatabaseError as exc:
            from psycopg.errors import DuplicatePreparedStatement, InvalidSqlStatementName

            if isinstance(exc.__cause__, DuplicatePreparedStatement | InvalidSqlStatementName):
                exc.add_note(POOLER_HINT)
                # psycopg keeps believing the statement prepared until a rollback (which the caller's
                # transaction, if any, must now do); outside one, start afresh on a new connection.
                if self.connection.get_autocommit():
                    self.connection.close()
            raise

    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[Job]:
        for new in jobs:
            _check_bounds(new, max_payload_bytes)
        if not jobs:
            return []
        due_queues = sorted({new.queue for new in jobs if new.due_at <= now})
        if len(jobs) == 1:
            new = jobs[0]
            one = [new.wire_name, new.queue, new.payload, new.max_attempts, new.due_at, now]
            rows = self._rows(ENQUEUE_ONE, [*one, HINT_CHANNEL, new.queue, bool(due_queues)], prepare=True)
            ids = [row[0] for row in rows]
            return self._enqueued(ids, jobs, due_queues, now)
        params = [
            now,
            [new.wire_name for new in jobs],
            [new.queue for new in jobs],
            [new.payload for new in jobs],
            [new.max_attempts for new in jobs],
            [new.due_at for new in jobs],
            HINT_CHANNEL,
            due_queues,
        ]
        ids = sorted(
            row[0] for row in self._rows(ENQUEUE, params, prepare=True)
        )  # one statement: atomic on its own
        return self._enqueued(ids, jobs, due_queues, now)

    def _enqueued(
        self, ids: list[int], jobs: Sequence[NewJob], due_queues: list[str], now: datetime
    ) -> list[Job]:
        if due_queues:
            transaction.on_commit(lambda: wakeups.publish(due_queues), using=self.using)
        rows = []
        for job_id, new in zip(ids, jobs, strict=True):
            row = Job(
                id=job_id, wire_name=new.wire_name, queue=new.queue, payload=new.payload,
                max_attempts=new.max_attempts, due_at=new.due_at, created_at=now,
            )  # fmt: skip
            row._state.adding, row._state.db = False, self.using
            rows.append(row)
        return rows

    def _queue_settings(self, queues: Sequence[str]) -> dict[str, tuple[bool, int | None]]:
        rows = self._rows(LOCK_AND_READ_SETTINGS, [ADVISORY_CLASS, list(queues)])
        return {q: (paused, limit) for q, _, paused, limit in rows if paused is not None}

    def _claim_unlimited(
        self, worker_id: str, queue: str, take: int, lease_duration: timedelta, now: datetime
    ) -> list[ClaimedJob]:
        params = {
            "queue": queue,
            "now": now,
            "take": take,
            "owner": worker_id,
            "expires": now + lease_duration,
        }
        return [ClaimedJob(**_claimed(row)) for row in self._rows(CLAIM_UNLIMITED_QUEUE, params)]

    def report(
        self,
        *,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        now: datetime,
        details: Mapping[int, str] | None = None,
    ) -> ReportResult:
        if not reports:
            return ReportResult(applied=frozenset(), stale=frozenset())
        details = details or {}
        first: dict[int, OutcomeReport] = {}
        for report in reports:
            first.setdefault(report.job_id, report)  # a job listed twice applies once, by its first row
        changes = [
            _Change.for_report(r, False, now, worker_id, details.get(r.job_id)) for r in first.values()
        ]
        with transaction.atomic(using=self.using):
            rows = self._rows(REPORT, {**_arrays(changes), "owner": worker_id, "now": now})
            fenced = {job_id for what, job_id in rows if what == "fenced"}
            moved = {job_id for what, job_id in rows if what == "moved"}
            if fenced - moved:  # failures of cancel-requested jobs: they end cancelled
                cancelled = [
                    _Change.for_report(first[job_id], True, now, worker_id, details.get(job_id))
                    for job_id in sorted(fenced - moved)
                ]
                self._apply(cancelled, now)
        ids = {r.job_id for r in reports}
        return ReportResult(applied=frozenset(fenced), stale=frozenset(ids - fenced))

    def _apply(self, changes: Sequence[_Change], now: datetime) -> None:
        if not changes:
            return
        moved = self._rows(APPLY, {**_arrays(changes), "now": now})
        if len(moved) != len(changes):
            raise AssertionError(
                f"leased jobs {sorted(c.job_id for c in changes)} lost their state under a lease"
            )

    def heartbeat(
        self, *, worker_id: str, job_ids: Sequence[int], lease_duration: timedelta, now: datetime
    ) -> list[HeartbeatResult]:
        if not job_ids:
            return []
        params = {"expires": now + lease_duration, "owner": worker_id, "ids": list(job_ids), "now": now}
        flags = dict(self._rows(HEARTBEAT, params))  # one statement: atomic on its own
        return [
            HeartbeatResult(job_id=i, renewed=i in flags, cancel_requested=bool(flags.get(i, False)))
            for i in job_ids
        ]


def _claimed(row: tuple[Any, ...]) -> dict[str, Any]:
    job_id, wire_name, queue, payload, attempt, max_attempts, due_at = row
    return {
        "id": job_id, "wire_name": wire_name, "queue": queue, "payload": payload, "attempt": attempt,
        "max_attempts": max_attempts, "due_at": due_at,
    }  # fmt: skip
