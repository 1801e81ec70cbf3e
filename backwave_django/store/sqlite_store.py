"""The SQLite store: the portable store with its claim, report and the sweep's moves in a few plain
statements.

On SQLite a write transaction holds the whole database, and in a worker process it holds the write gate
(``store/sqlite_gate.py``) that every handler thread queues on for its own writes. Built by the ORM, a Pump's
claim of 20 jobs held it for 2.6 ms and a report for 5.3 ms, most of that the ORM's own work in Python; so
here each is a handful of statements with their parameters, and the rows come back by ``RETURNING`` (SQLite
3.35; on an older library the portable path is taken). The decisions are the same ones: the moves come from
``core.transitions`` through ``store.changes``, and the conformance suite runs against this store.

The portable store locks a report's jobs and their children in id order; SQLite's write lock holds the whole
file from ``BEGIN IMMEDIATE`` on, so there is nothing more to lock, and the children a parent's end resolves
are found by its ``has_children`` flag, read in the same transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..core.records import ClaimedJob, OutcomeReport
from ..core.retry import RetryPolicy
from ..core.states import State
from . import changes
from .changes import Change
from .contract import OutcomeDetail, StoreError
from .django import DjangoStore

#: One queue's due jobs, in claim order, leased; the rows come back in no particular order.
CLAIM = f"""
UPDATE backwave_django_job SET state = '{State.LEASED}', attempt = attempt + 1
WHERE id IN (
    SELECT id FROM backwave_django_job
    WHERE state = %s AND queue = %s AND due_at <= %s
    ORDER BY priority DESC, due_at, id
    LIMIT %s
)
RETURNING {", ".join(changes.CLAIMED_FIELDS)}, priority
"""
LEASE = (
    "INSERT INTO backwave_django_lease (job_id, queue, owner, attempt, claimed_at, expires_at) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
OUTCOME = (
    "INSERT INTO backwave_django_outcome (job_id, attempt, worker, kind, state_after, message, detail, "
    "recorded_at, error_type, started_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


class SQLiteStore(DjangoStore):
    """The Storage Contract on SQLite, its hot paths in plain SQL. Same semantics as :class:`DjangoStore`."""

    one_writer_at_a_time = True

    def _quick(self) -> bool:
        """Whether this SQLite returns rows from an UPDATE (3.35 and later)."""
        # Read from the driver: Django 5.2's features have no can_return_rows_from_update.
        return bool(self.connection.Database.sqlite_version_info >= (3, 35))

    def _sql(self, sql: str, params: Sequence[Any]) -> tuple[list[tuple[Any, ...]], int]:
        """One statement through Django's cursor (so its execute wrappers see it): its rows and rowcount."""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = list(cursor.fetchall()) if cursor.description else []
            return rows, cursor.rowcount

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self.connection.cursor() as cursor:
                cursor.executemany(sql, rows)

    def _time(self, value: datetime | None) -> Any:
        return self.connection.ops.adapt_datetimefield_value(value)

    def _read_time(self, value: Any) -> Any:
        return self.connection.ops.convert_datetimefield_value(value, None, self.connection)

    # -- claim ---------------------------------------------------------------------------------------

    def _queue_settings(self, queues: Sequence[str]) -> dict[str, tuple[bool, int | None]]:
        if not self._quick():
            return super()._queue_settings(queues)
        where, params = self._among("queue", queues)
        rows, _ = self._sql(
            f"SELECT queue, paused, concurrency_limit FROM backwave_django_queuesettings WHERE {where}",
            params,
        )
        return {queue: (bool(paused), limit) for queue, paused, limit in rows}

    def _claim_queue(
        self,
        worker_id: str,
        queue: str,
        take: int,
        lease_duration: timedelta,
        now: datetime,
        *,
        limited: bool,
    ) -> list[ClaimedJob]:
        if limited or not self._quick():  # under the settings row lock: the portable path
            return super()._claim_queue(worker_id, queue, take, lease_duration, now, limited=limited)
        state = changes.claimable_state()  # the state CLAIM picks from: its move to leased is still legal
        rows, _ = self._sql(CLAIM, [state.value, queue, self._time(now), take])
        rows.sort(key=lambda row: (-row[-1], row[6], row[0]))  # the claim order: priority, due time, id
        claimed = [self._claimed(row[:-1]) for row in rows]
        at, expires = self._time(now), self._time(now + lease_duration)
        self._many(LEASE, [(job.id, job.queue, worker_id, job.attempt, at, expires) for job in claimed])
        return claimed

    def _claimed(self, row: Sequence[Any]) -> ClaimedJob:
        (job_id, wire_name, queue, payload, attempt, max_attempts, due_at, timeout, scheduled_for,
         created_at, trace_context) = row  # fmt: skip
        return ClaimedJob(
            id=job_id, wire_name=wire_name, queue=queue, payload=payload, attempt=attempt,
            max_attempts=max_attempts, due_at=self._read_time(due_at),
            timeout=None if timeout is None else timedelta(microseconds=timeout),
            scheduled_for=self._read_time(scheduled_for), created_at=self._read_time(created_at),
            trace_context=trace_context,
        )  # fmt: skip

    # -- outcomes ------------------------------------------------------------------------------------

    def _report(
        self,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail],
    ) -> tuple[set[int], bool]:
        if not self._quick():
            return super()._report(worker_id, reports, retry, now, details)
        with self._write():
            first = changes.first_per_attempt(reports)
            where, params = self._among("job_id", sorted({job_id for job_id, _ in first}))
            leases, _ = self._sql(
                "SELECT job_id, attempt, claimed_at, queue FROM backwave_django_lease "
                f"WHERE owner = %s AND expires_at > %s AND {where}",
                [worker_id, self._time(now), *params],
            )
            held = {(j, a): (claimed, q) for j, a, claimed, q in leases if (j, a) in first}
            ids = sorted(job_id for job_id, _ in held)
            if not ids:
                return set(), False
            leased, params = self._among("job_id", ids)
            self._sql(f"DELETE FROM backwave_django_lease WHERE {leased}", params)
            where, params = self._among("id", ids)
            flags, _ = self._sql(
                f"SELECT id, cancel_requested, has_children FROM backwave_django_job WHERE {where}", params
            )
            cancel = {job_id for job_id, flag, _ in flags if flag}
            parents = {job_id for job_id, _, kids in flags if kids}
            moves = [
                changes.for_report(
                    first[job_id, attempt], worker=worker_id, cancel_requested=job_id in cancel, retry=retry,
                    now=now, detail=details.get(job_id), started_at=self._read_time(claimed),
                )
                for (job_id, attempt), (claimed, _) in held.items()
            ]  # fmt: skip
            opened = self._apply_and_resolve(moves, parents, now)
        return set(ids), opened or self._frees_limited({queue for _, queue in held.values()})

    def _apply(self, moves: Sequence[Change], now: datetime) -> None:
        if not self._quick():
            return super()._apply(moves, now)
        groups: dict[tuple[object, ...], list[Change]] = defaultdict(list)
        for change in moves:
            groups[change.update_key].append(change)
        at = self._time(now)
        for group in groups.values():
            move = group[0].move
            sets, values = ["state = %s"], list[Any]([move.state.value])
            if move.is_terminal:  # a finished job has nothing left to cancel
                sets += ["terminal_at = %s", "terminal_cause = %s", "cancel_requested = 0"]
                values += [at, group[0].message]
            elif move.due_at is not None:
                sets.append("due_at = %s")
                values.append(self._time(move.due_at))
            if move.attempt_delta:
                sets.append("attempt = attempt + %s")
                values.append(move.attempt_delta)
            where, params = self._among("id", [c.job_id for c in group])
            _, updated = self._sql(
                f"UPDATE backwave_django_job SET {', '.join(sets)} WHERE state = %s AND {where}",
                [*values, State.LEASED.value, *params],
            )
            if updated != len(group):
                lost = [c.job_id for c in group]
                raise StoreError(f"leased jobs {lost} lost their state under a held lease")
        outputs = [(c.output, c.job_id) for c in moves if c.output is not None]
        self._many("UPDATE backwave_django_job SET output = %s WHERE id = %s", outputs)
        logged = [
            (c.job_id, c.attempt, c.worker, c.kind.value, c.state.value, c.message, c.detail, at,
             c.error_type, self._time(c.started_at))
            for c in moves
        ]  # fmt: skip
        self._many(OUTCOME, logged)
        self._add_tags((c.job_id, c.tags) for c in moves)
        self._announce_endings(moves)
        return None
