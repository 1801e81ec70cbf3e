"""The PostgreSQL store: the Django store with its hot paths in single SQL statements, and PostgreSQL's own
mechanisms: advisory locks around queue settings and NOTIFY wake-up hints.

Enqueue, claim, report, heartbeat and the batch state change behind expiry each cost one statement (plus the
transaction around it), whatever the batch size: no per-job round-trip and no model instances on the claim and
report paths. No statement decides where a job goes: the moves come from ``core.transitions`` (through
``store.changes``) as arrays; a report moves the jobs that have no cancel request, and those that have one are
moved by a second statement, for the flag the first read under each job's lock.
``tests/contract/test_table_agreement.py`` proves the SQL and the portable store agree row for row.

Queue settings are guarded by an advisory lock keyed on the queue name: claims take it shared, operator
changes take it exclusive, so a first-ever pause or limit can never slip past a claim that is in flight.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.db.backends.utils import CursorWrapper

from .. import conf
from ..core.records import ClaimedJob, HeartbeatResult, OutcomeReport
from ..core.retry import RetryPolicy
from ..core.states import State
from ..core.transitions import CLAIMABLE
from . import announced, changes
from .bounds import check_new_jobs
from .changes import Change
from .contract import EnqueuedJob, NewJob, OutcomeDetail, StoreError
from .django import DjangoStore
from .postgres_claim import claim_one_queue

#: How many jobs of a large batch go in one statement of its pipeline (``enqueue_in_parts``). Measured with
#: batches of 5,000 on a 2-core machine: parts of 100 to 500 enqueued 1.4x as fast as one statement (the
#: server inserts one part while the client encodes the next), 2,500 only 1.2x.
PART = 500

#: The first key of our two-key advisory locks, so they never collide with an application's own.
ADVISORY_CLASS = 0x4257  # "BW"
LOCK_QUEUES_SHARED = "SELECT pg_advisory_xact_lock_shared(%s, hashtext(q)) FROM unnest(%s::text[]) AS q"
LOCK_QUEUE_EXCLUSIVE = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
NOTIFY = "SELECT pg_notify(%s, q) FROM unnest(%s::text[]) AS q"

#: What a pooler that cannot keep prepared statements (PgBouncer in transaction mode without
#: ``max_prepared_statements``) makes of ours: it hands the next statement another server connection.
POOLER_HINT = (
    "backwave prepares its enqueue statements; behind a connection pooler that cannot keep prepared "
    "statements (PgBouncer in transaction mode before 1.21, or without max_prepared_statements), set "
    "BACKWAVE['PREPARED_STATEMENTS'] = False."
)

_INSERT_COLUMNS = """
    INSERT INTO backwave_django_job
        (wire_name, queue, payload, state, attempt, max_attempts, due_at, created_at, terminal_cause,
         cancel_requested, timeout, priority, trace_context)
"""

ENQUEUE = f"""
WITH inserted AS (
    {_INSERT_COLUMNS}
    SELECT w, q, p, 'scheduled', 0, m, d, %s, '', false, t, r, c
    FROM unnest(
        %b::text[], %b::text[], %b::text[], %b::int[], %b::timestamptz[], %b::interval[], %b::smallint[],
        %b::text[]
    ) WITH ORDINALITY AS u(w, q, p, m, d, t, r, c, n)
    ORDER BY n
    RETURNING id
), hinted AS (
    SELECT pg_notify(%s, q) FROM unnest(%b::text[]) AS q
)
SELECT id, (SELECT count(*) FROM hinted) FROM inserted
"""

#: Jobs that differ only in their payload (what ``enqueue_many`` writes): the shared values are sent once,
#: the payloads as one array; sending each shared column as an array of equal values cost the client more
#: than the server spent inserting.
ENQUEUE_UNIFORM = f"""
WITH inserted AS (
    {_INSERT_COLUMNS}
    SELECT %s, %s, p, 'scheduled', 0, %s, %s, %s, '', false, %s::interval, %s, %s
    FROM unnest(%b::text[]) WITH ORDINALITY AS u(p, n)
    ORDER BY n
    RETURNING id
), hinted AS (
    SELECT pg_notify(%s, %s) WHERE %s
)
SELECT id, (SELECT count(*) FROM hinted) FROM inserted
"""

#: One job: a plain VALUES insert plans and runs faster than the unnest form.
ENQUEUE_ONE = f"""
WITH inserted AS (
    {_INSERT_COLUMNS}
    VALUES (%s, %s, %s, 'scheduled', 0, %s, %s, %s, '', false, %s::interval, %s, %s)
    RETURNING id
), hinted AS (
    SELECT pg_notify(%s, %s) WHERE %s
)
SELECT id, (SELECT count(*) FROM hinted) FROM inserted
"""

#: One job with a unique key: written unless an unfinished job of its wire name holds the key (the partial
#: unique index ``backwave_job_unique_live`` decides, waiting for a concurrent holder to commit or roll back).
ENQUEUE_KEYED = f"""
    {_INSERT_COLUMNS.replace("trace_context)", "trace_context, unique_key)")}
    VALUES (%s, %s, %s, 'scheduled', 0, %s, %s, %s, '', false, %s::interval, %s, %s, %s)
    ON CONFLICT (wire_name, unique_key)
        WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'awaiting_parent', 'leased')
    DO NOTHING
    RETURNING id
"""

#: Takes each queue's advisory lock shared (operator changes take it exclusive) and reads its settings.
LOCK_AND_READ_SETTINGS = """
SELECT q, pg_advisory_xact_lock_shared(%s, hashtext(q)), s.paused, s.concurrency_limit
FROM unnest(%b::text[]) AS q LEFT JOIN backwave_django_queuesettings s ON s.queue = q
"""

#: Which of several queues hold a due job: one index probe per queue, whatever the backlog.
QUEUES_WITH_DUE = f"""
SELECT q FROM unnest(%b::text[]) AS q
WHERE EXISTS (
    SELECT 1 FROM backwave_django_job WHERE state = '{CLAIMABLE}' AND queue = q AND due_at <= %s
)
"""

#: One queue, no limit: pick, lease and log in one statement. The settings guard runs on this statement's
#: own snapshot, so a pause or limit committed after the read above is still honoured. It picks only jobs in
#: the claimable state (``store.changes.claimable_state`` checks its move before each claim) and locks them.
CLAIM_UNLIMITED_QUEUE = f"""
WITH picked AS (
    SELECT id FROM backwave_django_job
    WHERE state = '{CLAIMABLE}' AND queue = %(queue)s AND due_at <= %(now)s
      AND NOT EXISTS (
          SELECT 1 FROM backwave_django_queuesettings s
          WHERE s.queue = %(queue)s AND (s.paused OR s.concurrency_limit IS NOT NULL)
      )
    ORDER BY priority DESC, due_at, id
    LIMIT %(take)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE backwave_django_job j SET state = '{State.LEASED}', attempt = j.attempt + 1
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.wire_name, j.queue, j.payload, j.attempt, j.max_attempts, j.due_at, j.timeout,
        j.scheduled_for, j.created_at, j.trace_context, j.priority
), leased AS (
    INSERT INTO backwave_django_lease (job_id, queue, owner, attempt, claimed_at, expires_at)
    SELECT id, queue, %(owner)s, attempt, %(now)s, %(expires)s FROM claimed
)
SELECT id, wire_name, queue, payload, attempt, max_attempts, due_at, timeout, scheduled_for, created_at,
    trace_context
FROM claimed ORDER BY priority DESC, due_at, id
"""

#: Moves a store has decided (it read each job's cancel flag under the job's lock): a JSON object from each
#: job's id to its move, an array of these fields. A statement reaches a job's move from the job's row (jsonb
#: finds a key by binary search), so no join pairs the moves with the jobs: PostgreSQL cannot tell how many
#: rows a set of moves or a data-modifying CTE holds (it guesses one, or ten), and each such join became a
#: nested loop that rescanned one side for every row of the other, quadratic in the batch (at 256 outcomes,
#: 40 of a report's 42 ms in one form of these statements, 38 ms in another).
MOVE_FIELDS = (
    "attempt", "kind", "worker", "detail", "state", "due_at", "cause", "delta", "error_type", "output",
    "started_at",
)  # fmt: skip


def _field(name: str, move: str = "c") -> str:
    """A field of a move, as SQL (``move`` is the move's JSON array)."""
    cast = {"attempt": "::int", "delta": "::int", "due_at": "::timestamptz", "started_at": "::timestamptz"}
    return f"({move}->>{MOVE_FIELDS.index(name)}){cast.get(name, '')}"


#: A job's move, looked up by its id (``row`` names the job's row).
_LOOKUP = "(SELECT %(changes)b::jsonb -> {row}.id::text AS c) AS found"

#: The move of a lease's job (its Attempt number is the fence's).
_AT_LEASE = "(%(changes)b::jsonb -> l.job_id::text)"

#: What a move writes to a job, evaluated once per job.
_MOVE = f"""
    (state, attempt, due_at, terminal_at, terminal_cause, cancel_requested, output) = (
        SELECT m.state, j.attempt + m.delta, COALESCE(m.due_at, j.due_at),
            CASE WHEN m.state = 'scheduled' THEN NULL ELSE %(now)s END,
            CASE WHEN m.state = 'scheduled' THEN j.terminal_cause ELSE m.cause END,
            CASE WHEN m.state = 'scheduled' THEN j.cancel_requested ELSE false END,
            CASE WHEN m.state = 'succeeded' THEN m.output ELSE j.output END
        FROM (
            SELECT {_field("state")} AS state, {_field("delta")} AS delta, {_field("due_at")} AS due_at,
                {_field("cause")} AS cause, {_field("output")} AS output
            FROM {_LOOKUP.format(row="j")}
        ) AS m
    )
"""

#: One Outcome row per moved job (``moved`` returns each job's id, new state and when its Attempt began).
_LOG = f"""
    INSERT INTO backwave_django_outcome
        (job_id, attempt, worker, kind, state_after, message, detail, recorded_at, error_type, started_at)
    SELECT m.id, {_field("attempt")}, {_field("worker")}, {_field("kind")}, m.state, {_field("cause")},
        {_field("detail")}, %(now)s, {_field("error_type")}, m.started_at
    FROM moved m, LATERAL {_LOOKUP.format(row="m")}
"""

#: Move leased jobs whose leases are gone and whose rows are locked already (the sweep's lapsed ones; a
#: report's cancel-requested ones) and write one Outcome each.
APPLY = f"""
WITH moved AS (
    UPDATE backwave_django_job j SET {_MOVE}
    WHERE j.id = ANY(%(ids)b::bigint[]) AND j.state = 'leased'
    RETURNING j.id, j.state, (SELECT {_field("started_at")} FROM {_LOOKUP.format(row="j")}) AS started_at
), logged AS ({_LOG})
SELECT id FROM moved
"""

#: The fenced report, in one statement. It deletes the leases this worker still holds for these Attempts
#: (live at ``now``; one Attempt per job, its number read from the job's move), locks the fenced
#: jobs and their unresolved direct children in ascending id order (store/edges.py: the locking order; the
#: leases first, as the expiry sweep takes them) and reads their cancel flags under those locks, moves the
#: fenced jobs that have no cancel request (the caller moves the others, whose moves depend on it) and writes
#: their Outcome rows. Every lock is taken before the first job is moved: ``fence``, one row that aggregates
#: the fence (the update reads when each Attempt began there), counts them. Never two INs joined by OR:
#: PostgreSQL can only answer an OR of subqueries by testing every row of the job table (finished ones
#: included) on every report. It answers in one row of arrays: the fenced jobs, their queues, those with a
#: cancel request (and when their Attempts began), those with children, and the moved ones. (Three rows for
#: every job, each with a timestamp that Django's loader parses in Python, were a tenth of the Pump's CPU.)
REPORT = f"""
WITH fenced AS (
    DELETE FROM backwave_django_lease l
    WHERE l.job_id = ANY(%(ids)b::bigint[]) AND l.owner = %(owner)s AND l.expires_at > %(now)s
      AND l.attempt = {_field("attempt", _AT_LEASE)}
    RETURNING l.job_id, l.claimed_at, l.queue
), locked AS MATERIALIZED (
    SELECT k.id, k.cancel_requested, k.has_children FROM backwave_django_job k
    WHERE k.id = ANY(ARRAY(
        SELECT job_id FROM fenced
        UNION SELECT d.child_id FROM backwave_django_dependency d
        WHERE d.parent_id = ANY(ARRAY(SELECT job_id FROM fenced)) AND d.resolved_at IS NULL
    ))
    ORDER BY k.id FOR UPDATE
), fence AS MATERIALIZED (
    SELECT array_agg(job_id) AS ids, array_agg(claimed_at) AS claimed, (SELECT count(*) FROM locked) AS locks
    FROM fenced
), moved AS (
    UPDATE backwave_django_job j SET {_MOVE}
    FROM fence f
    WHERE j.id = ANY(f.ids) AND j.state = 'leased' AND NOT j.cancel_requested AND f.locks >= 0
    RETURNING j.id, j.state, f.claimed[array_position(f.ids, j.id)] AS started_at
), logged AS ({_LOG})
SELECT f.ids, ARRAY(SELECT DISTINCT queue FROM fenced),
    ARRAY(SELECT l.id FROM locked l WHERE l.cancel_requested AND l.id = ANY(f.ids) ORDER BY l.id),
    ARRAY(
        SELECT f.claimed[array_position(f.ids, l.id)] FROM locked l
        WHERE l.cancel_requested AND l.id = ANY(f.ids) ORDER BY l.id
    ),
    ARRAY(SELECT l.id FROM locked l WHERE l.has_children AND l.id = ANY(f.ids)),
    ARRAY(SELECT id FROM moved)
FROM fence f
"""

TERMINATE = "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid"

HEARTBEAT = """
WITH renewed AS (
    UPDATE backwave_django_lease SET expires_at = %(expires)s
    WHERE owner = %(owner)s AND job_id = ANY(%(ids)b::bigint[]) AND expires_at > %(now)s
    RETURNING job_id
)
SELECT r.job_id, j.cancel_requested FROM renewed r JOIN backwave_django_job j ON j.id = r.job_id
"""


def _shared(new: NewJob) -> tuple[object, ...]:
    """What ENQUEUE_UNIFORM sends once for a whole batch (the unique key is None in both statements)."""
    return (new.wire_name, new.queue, new.max_attempts, new.due_at, new.timeout, new.priority,
            new.trace_context)  # fmt: skip


def _uniform(jobs: Sequence[NewJob]) -> bool:
    """Whether every job has the same values in the fields ENQUEUE_UNIFORM sends once (a batch's jobs share
    their objects, which is quicker to see than equal values)."""
    first = jobs[0]
    values = _shared(first)
    return all(
        (
            new.wire_name is first.wire_name
            and new.queue is first.queue
            and new.max_attempts is first.max_attempts
            and new.due_at is first.due_at
            and new.timeout is first.timeout
            and new.priority is first.priority
            and new.trace_context is first.trace_context
        )
        or _shared(new) == values
        for new in jobs
    )


def _plain(new: NewJob) -> bool:
    """Whether one statement here can write this job (keys, tags and edges take the portable path)."""
    return new.unique_key is None and not new.tags and not new.parents


def _insert(jobs: Sequence[NewJob], now: datetime) -> tuple[str, list[Any]]:
    """The statement that inserts these plain jobs (at least one) and its parameters."""
    channel = conf.get().hint_channel
    due_queues = sorted({new.queue for new in jobs if new.due_at <= now})
    new = jobs[0]
    if len(jobs) == 1:
        one = [new.wire_name, new.queue, new.payload, new.max_attempts, new.due_at, now, new.timeout]
        return ENQUEUE_ONE, [*one, new.priority, new.trace_context, channel, new.queue, bool(due_queues)]
    if _uniform(jobs):
        one = [new.wire_name, new.queue, new.max_attempts, new.due_at, now, new.timeout, new.priority]
        payloads = [new.payload for new in jobs]
        return ENQUEUE_UNIFORM, [*one, new.trace_context, payloads, channel, new.queue, bool(due_queues)]
    columns = [
        [new.wire_name for new in jobs],
        [new.queue for new in jobs],
        [new.payload for new in jobs],
        [new.max_attempts for new in jobs],
        [new.due_at for new in jobs],
        [new.timeout for new in jobs],
        [new.priority for new in jobs],
        [new.trace_context for new in jobs],
    ]
    return ENQUEUE, [now, *columns, channel, due_queues]


def _moves(moves: Sequence[Change]) -> dict[str, Any]:
    """The parameters of APPLY and REPORT for these moves (at most one per job)."""
    from psycopg.types.json import Jsonb
    from psycopg.types.numeric import Int8

    found = {
        str(c.job_id): [
            c.attempt, c.kind.value, c.worker, c.detail, c.state.value,
            None if c.move.due_at is None else c.move.due_at.isoformat(), c.message, c.move.attempt_delta,
            c.error_type, c.output, None if c.started_at is None else c.started_at.isoformat(),
        ]
        for c in moves
    }  # fmt: skip
    # The ids go as bigint[]: psycopg sends a list of small ints as int2[] or int4[], and under the prepared
    # statement's generic plan a cast of that parameter is redone for every row that reads it.
    return {"ids": [Int8(c.job_id) for c in moves], "changes": Jsonb(found)}


@functools.cache
def pipelines() -> bool:
    """Whether psycopg's libpq sends pipelines (libpq 14 on; psycopg's binary wheels bring their own)."""
    import psycopg

    return bool(psycopg.Pipeline.is_supported())


@functools.cache
def _hot_cursor(prepare: bool) -> Any:
    """A psycopg cursor class (server-side binding) that always passes ``prepare`` to psycopg, which Django's
    cursor wrapper cannot. psycopg is imported on first use: SQLite-only projects need not install it."""
    import psycopg

    class HotCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, **{**kwargs, "prepare": prepare})

    return HotCursor


class _Sent:
    """The statements of one :meth:`PostgresStore._statements` block: ``add`` sends one, and ``rows`` holds
    the rows of each once the block has ended."""

    def __init__(self, cursor: Callable[[], Any]) -> None:
        self._cursor = cursor
        self.cursors: list[Any] = []
        self.rows: list[list[tuple[Any, ...]]] = []

    def add(self, sql: str, params: Any) -> None:
        cursor = self._cursor()
        self.cursors.append(cursor)
        cursor.execute(sql, params)


class PostgresStore(DjangoStore):
    """The Storage Contract on PostgreSQL, hot paths in SQL. Same semantics as :class:`DjangoStore`."""

    def __init__(self, using: str = "default") -> None:
        super().__init__(using)
        self._pooled: bool | None = None

    def behind_pooler(self) -> bool:
        """Whether this alias reaches PostgreSQL through a connection pooler: the server process that answers
        is not the one the connection was told of when it opened (PgBouncer tells its clients a key of its
        own). Asked once per store."""
        if self._pooled is None:
            self.connection.ensure_connection()
            told = self.connection.connection.info.backend_pid
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self._pooled = cursor.fetchone()[0] != told
        return self._pooled

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)

    def cut_off_sessions(self, sessions: Sequence[object]) -> None:
        """End the server sessions (on this server) that hold a transaction open or run a statement: the
        server rolls their transaction back, and the handler's next use of them fails. Idle sessions are left
        alone: the guard on them refuses any further statement. Sessions on other servers get a cancel, and so
        does every session behind a pooler, whose backend pids are made up (terminating one could end another
        client's session): a running statement stops, but a transaction left idle stays open until the
        pooler's ``idle_transaction_timeout`` ends it."""
        from psycopg.pq import TransactionStatus

        super().cut_off_sessions(sessions)  # the handler's SQLite sessions, if it has any
        ours = self.connection.settings_dict
        pids = []
        for session in sessions:
            raw = getattr(session, "connection", None)
            if raw is None or getattr(session, "vendor", "") != "postgresql" or raw.closed:
                continue
            if raw.info.transaction_status == TransactionStatus.IDLE:
                continue
            theirs = getattr(session, "settings_dict", {})
            same = all(theirs.get(key) == ours.get(key) for key in ("HOST", "PORT", "NAME"))
            if same and not self.behind_pooler():
                pids.append(raw.info.backend_pid)
            else:
                raw.cancel_safe()
        if pids:
            self._execute(TERMINATE, [pids])

    def _lock_queues_for_claim(self, queues: Sequence[str]) -> None:
        self._execute(LOCK_QUEUES_SHARED, [ADVISORY_CLASS, list(queues)])

    def _lock_queue_for_change(self, queue: str) -> None:
        self._execute(LOCK_QUEUE_EXCLUSIVE, [ADVISORY_CLASS, queue])

    def _hint_other_processes(self, queues: Sequence[str]) -> None:
        # Delivered at commit, and only then, on BACKWAVE['HINT_CHANNEL'].
        self._execute(NOTIFY, [conf.get().hint_channel, list(queues)])

    def _check_constraints_at_once(self) -> None:
        self._execute("SET CONSTRAINTS ALL IMMEDIATE", [])  # Django's foreign keys are deferred

    def _among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """One array parameter, whatever the number of values: one statement text for every batch size."""
        return f"{column} = ANY(%s)", [list(values)]

    def _rows(self, sql: str, params: Any, *, prepare: bool = False) -> list[tuple[Any, ...]]:
        """Run one hot statement with server-side binding (see :meth:`_results`)."""
        return self._results([(sql, params)], prepare=prepare)[0]

    def _results(
        self, statements: Sequence[tuple[str, Any]], *, prepare: bool = False
    ) -> list[list[tuple[Any, ...]]]:
        """Run hot statements with server-side binding, each one's rows (see :meth:`_statements`); several
        go in one pipeline."""
        with self._statements(prepare=prepare, pipeline=len(statements) > 1) as sent:
            for sql, params in statements:
                sent.add(sql, params)
        return sent.rows

    @contextmanager
    def _statements(self, *, prepare: bool = False, pipeline: bool = False) -> Iterator[_Sent]:
        """A block that sends hot statements (``add``) with server-side binding; each one's rows are in
        ``rows`` once it ends. They still go through Django's cursor wrapper, so execute wrappers see them.
        In a ``pipeline`` each is sent without waiting for the one before: outside a transaction they make
        one transaction that the server commits at the pipeline's end (its Sync), inside one they join it.

        ``prepare``: keep them prepared on this connection. Django turns psycopg's prepared statements off
        unless ``OPTIONS['prepare_threshold']`` says otherwise, so unless ``BACKWAVE['PREPARED_STATEMENTS']``
        is False the threshold is lifted for this one block (the project's own queries are untouched).
        The enqueue statements ask for it (planning is a third of a single enqueue's server time, and their
        plan is the same for every call), and so do the report, the sweep's moves and the claim of one queue
        (planning them was a fifth of the drain at the default batch sizes; their plans reach every row by
        its key, or walk the claim index in its order, so the generic plan suits every batch size).
        Everything else here is planned for its own parameters, even where the project's
        ``prepare_threshold`` prepares everything else.
        """
        self.connection.ensure_connection()
        raw = self.connection.connection
        prepare = prepare and conf.get().prepared_statements
        lift = prepare and raw.prepare_threshold is None
        cursor_class = _hot_cursor(prepare)
        try:
            with ExitStack() as cursors_open:
                sent = _Sent(
                    lambda: cursors_open.enter_context(CursorWrapper(cursor_class(raw), self.connection))
                )
                if lift:
                    raw.prepare_threshold = 0
                try:
                    with self.connection.wrap_database_errors, raw.pipeline() if pipeline else nullcontext():
                        yield sent
                finally:
                    if lift:
                        raw.prepare_threshold = None
                sent.rows = [list(cursor.fetchall()) for cursor in sent.cursors]
        except DatabaseError as exc:
            from psycopg.errors import DuplicatePreparedStatement, InvalidSqlStatementName

            if isinstance(exc.__cause__, DuplicatePreparedStatement | InvalidSqlStatementName):
                exc.add_note(POOLER_HINT)
                # psycopg keeps believing the statement prepared until a rollback (which the caller's
                # transaction, if any, must now do); outside one, start afresh on a new connection.
                if self.connection.get_autocommit():
                    self.connection.close()
            raise

    def enqueue(self, jobs: Sequence[NewJob], *, now: datetime, max_payload_bytes: int) -> list[EnqueuedJob]:
        if not all(map(_plain, jobs)):  # keys, tags and edges: the portable path
            return super().enqueue(jobs, now=now, max_payload_bytes=max_payload_bytes)
        check_new_jobs(jobs, max_payload_bytes)
        if not jobs:
            return []
        rows = self._rows(*_insert(jobs, now), prepare=True)  # one statement: atomic on its own
        return self._enqueued(jobs, rows, now)

    def enqueue_in_parts(
        self,
        count: int,
        make: Callable[[int, int], Sequence[NewJob]],
        *,
        now: datetime,
        max_payload_bytes: int,
    ) -> list[EnqueuedJob]:
        """A large batch goes in parts of ``PART`` jobs, each part sent as soon as it is made, all in one
        pipeline and one transaction (a savepoint inside the caller's): the server inserts one part while
        this process encodes the next. Anything raised while a part is made, and any bad job, rolls the
        whole batch back. A batch of one part, one with keys, tags or parents, or a libpq without pipelines:
        every job made first, then one ``enqueue``."""
        first = make(0, min(count, PART))
        if count <= PART or not pipelines() or not all(map(_plain, first)):
            every = [*first, *(make(PART, count) if count > PART else ())]
            return self.enqueue(every, now=now, max_payload_bytes=max_payload_bytes)
        jobs: list[NewJob] = []
        with transaction.atomic(using=self.using), self._statements(prepare=True, pipeline=True) as sent:
            for start in range(0, count, PART):
                part = first if start == 0 else make(start, min(count, start + PART))
                if not all(map(_plain, part)):
                    raise ValueError("every part of a batch must be plain when its first part is")
                check_new_jobs(part, max_payload_bytes, first=start)
                jobs.extend(part)
                sent.add(*_insert(part, now))
        return self._enqueued(jobs, [row for rows in sent.rows for row in rows], now)

    def _enqueued(
        self, jobs: Sequence[NewJob], rows: list[tuple[Any, ...]], now: datetime
    ) -> list[EnqueuedJob]:
        """What an enqueue of ``jobs`` returns, from the ids its statements returned; the wake-up hints (for
        the jobs due now) and the announcements go once they commit."""
        due_queues = sorted({new.queue for new in jobs if new.due_at <= now})
        if due_queues:
            self._hint_this_process(due_queues)
        done = [EnqueuedJob(id=job_id) for job_id in sorted(row[0] for row in rows)]
        self._announce(lambda: announced.births(jobs, done))
        return done

    def _insert_keyed(self, new: NewJob, now: datetime) -> int | None:
        one = [new.wire_name, new.queue, new.payload, new.max_attempts, new.due_at, now, new.timeout]
        rows = self._rows(ENQUEUE_KEYED, [*one, new.priority, new.trace_context, new.unique_key])
        return rows[0][0] if rows else None

    def _queue_settings(self, queues: Sequence[str]) -> dict[str, tuple[bool, int | None]]:
        rows = self._rows(LOCK_AND_READ_SETTINGS, [ADVISORY_CLASS, list(queues)])
        return {q: (paused, limit) for q, _, paused, limit in rows if paused is not None}

    def claim(
        self,
        *,
        worker_id: str,
        queues: Sequence[str],
        max_jobs: int,
        lease_duration: timedelta,
        now: datetime,
    ) -> list[ClaimedJob]:
        if len(queues) == 1 and max_jobs > 0 and self.connection.get_autocommit():
            limited, claimed = claim_one_queue(self, worker_id, queues[0], max_jobs, lease_duration, now)
            self._limits_read(queues, set(queues) if limited else set())
            if not limited:
                self._announce(lambda: announced.claims(claimed, worker_id))  # committed: sent at once
                return claimed
        return super().claim(
            worker_id=worker_id, queues=queues, max_jobs=max_jobs, lease_duration=lease_duration, now=now
        )

    def _queues_with_due(self, queues: Sequence[str], now: datetime) -> set[str]:
        if len(queues) == 1:
            return set(queues)
        return {q for (q,) in self._rows(QUEUES_WITH_DUE, [list(queues), now])}

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
        if limited:  # under the settings row lock taken by _free_slots: the ORM path
            return super()._claim_queue(worker_id, queue, take, lease_duration, now, limited=True)
        changes.claimable_state()  # the state the statement picks from: its move to leased is still legal
        params = {
            "queue": queue,
            "now": now,
            "take": take,
            "owner": worker_id,
            "expires": now + lease_duration,
        }
        return [changes.claimed_job(row) for row in self._rows(CLAIM_UNLIMITED_QUEUE, params)]

    def _report(
        self,
        worker_id: str,
        reports: Sequence[OutcomeReport],
        retry: RetryPolicy,
        now: datetime,
        details: Mapping[int, OutcomeDetail],
    ) -> tuple[set[int], bool]:
        first = changes.first_per_attempt(reports)
        by_job = {job_id: report for (job_id, _), report in first.items()}
        if len(by_job) < len(first):  # two Attempts of one job (one at most holds its lease): the ORM's way
            return super()._report(worker_id, reports, retry, now, details)

        def move(job_id: int, cancel_requested: bool, started_at: datetime | None = None) -> Change:
            return changes.for_report(
                by_job[job_id], worker=worker_id, cancel_requested=cancel_requested, retry=retry, now=now,
                detail=details.get(job_id), started_at=started_at,
            )  # fmt: skip

        moves = {job_id: move(job_id, False) for job_id in by_job}
        with transaction.atomic(using=self.using):
            params = {**_moves(list(moves.values())), "owner": worker_id, "now": now}
            [(ids, queues, flagged, flagged_began, with_children, moved_ids)] = self._rows(
                REPORT, params, prepare=True
            )
            held = set(ids or ())  # no fenced job: array_agg of nothing is NULL
            moved = [moves[job_id] for job_id in moved_ids]
            if len(moved) != len(held) - len(flagged):  # raised inside the transaction: nothing is written
                lost = sorted(held - set(flagged) - set(moved_ids))
                raise StoreError(f"leased jobs {lost} lost their state under a held lease")
            self._add_tags((c.job_id, c.tags) for c in moved)
            self._announce_endings(moved)
            # A cancel request changes the move: these are moved by the flag their lock read.
            cancelled = [move(job_id, True, at) for job_id, at in zip(flagged, flagged_began, strict=True)]
            self._apply(cancelled, now)
            ended = {c.job_id: c.state for c in (*moved, *cancelled) if c.move.is_terminal}
            kin = set(with_children)
            parents = {job_id: state for job_id, state in ended.items() if job_id in kin}
            if parents:  # only parents pay more than the one statement: their children are locked already
                self._resolve_children(parents, now)
        opened = bool(parents) or changes.opens([*moved, *cancelled], now)
        return held, opened or self._frees_limited(set(queues))

    def _apply(self, moves: Sequence[Change], now: datetime) -> None:
        if not moves:
            return
        moved = self._rows(APPLY, {**_moves(moves), "now": now}, prepare=True)
        if len(moved) != len(moves):
            raise StoreError(f"leased jobs {sorted(c.job_id for c in moves)} lost their state under a lease")
        self._add_tags((c.job_id, c.tags) for c in moves)
        self._announce_endings(moves)

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
