"""The MariaDB store (Django's ``mysql`` backend): the portable store, with MariaDB's own mechanisms where
the ORM has none: named locks around queue settings, and ``KILL CONNECTION`` to cut a handler off.

Queue settings. A claim reads a queue's settings, and a pause or limit must never slip past a claim in flight.
Once a queue has a settings row, its row lock would do; the first-ever pause or limit of a queue has no row to
lock yet (and READ COMMITTED, Django's default here, takes no gap locks). So the queue is guarded by MariaDB's
named locks (``GET_LOCK``), which need no row. They are exclusive, so each queue has :data:`LOCK_SLOTS` of
them: a claim takes one slot (chosen by its connection id, so that claims on different connections rarely wait
for each other), an operator change takes every slot, so it waits for every claim in flight and every claim
after it waits for it. Named locks belong to the session, not the transaction: they are released right after
the store's transaction ends, committed or not, and a session that ends (a lost connection, a reconnect) loses
them on the server. They are server-wide, so their names carry a hash of the database name and the queue name
(and stay within MariaDB's 64 characters).

Deadlocks. InnoDB locks every row a locking statement reads, and its optimizer reads a small table (the
leases, a young job table) by a full scan rather than by its key: so two workers' reports, sweeps and claims
can deadlock on rows neither of them wants. InnoDB then rolls the victim's whole transaction back and asks for
it again; the store does so itself for every operation that runs in a transaction of its own
(``store.deadlocks``; inside a caller's transaction, the caller gets the error: its transaction is gone).

Statement size. MariaDB refuses a statement larger than ``max_allowed_packet`` (16 MiB by default) and drops
the connection. Enqueue and outcome INSERTs are cut into batches that fit, counting the worst case of 4 bytes
a character (escaping doubles at most the one-byte ones); a single row must fit on its own, which the system
check ``backwave.E049`` makes sure of for the largest payload ``MAX_PAYLOAD_BYTES`` allows.

Wake-up hints. MariaDB has nothing like PostgreSQL's LISTEN/NOTIFY: hints stay inside the process that
enqueued, and Pumps of other processes find new work at their next poll (``POLL_INTERVAL``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import DatabaseError, OperationalError

from . import faults
from .deadlocks import restarted_on_deadlock
from .django import DjangoStore

logger = logging.getLogger("backwave.store")

#: Named locks per queue: a claim takes one, an operator change takes them all.
LOCK_SLOTS = 8
#: How long a claim or an operator change waits for a queue's named lock before it fails (transiently).
LOCK_WAIT_SECONDS = 30
KILL = "KILL CONNECTION %s"
#: MariaDB's "Unknown thread id": the session to kill has ended already.
NO_SUCH_THREAD = 1094


#: What a row costs in an INSERT besides its text columns, and a statement besides its rows (bytes).
ROW_OVERHEAD = 512
STATEMENT_OVERHEAD = 64 * 1024
#: max_allowed_packet by database alias, read once per process.
_packet_limits: dict[str, int] = {}


def largest_storable_payload(max_allowed_packet: int) -> int:
    """The largest MAX_PAYLOAD_BYTES whose payloads fit in one INSERT, even if escaping doubles each byte."""
    return max(0, (max_allowed_packet - STATEMENT_OVERHEAD - ROW_OVERHEAD) // 2)


def max_allowed_packet(connection: Any) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@SESSION.max_allowed_packet")
        return int(cursor.fetchone()[0])


class QueueLockTimeout(OperationalError):
    """A queue's named lock was not granted in time: transient, like a row lock wait timeout."""


def lock_name(database: str, queue: str, slot: int) -> str:
    digest = hashlib.sha1(f"{database}\x00{queue}".encode()).hexdigest()
    return f"backwave:{digest}:{slot}"


class MySQLStore(DjangoStore):
    """The Storage Contract on MariaDB: :class:`DjangoStore`'s semantics and SQL, and MariaDB's mechanisms."""

    def __init__(self, using: str = "default") -> None:
        super().__init__(using)
        self._held = threading.local()  # per thread: a stack of the lock names each open _write took

    enqueue = restarted_on_deadlock(DjangoStore.enqueue)  # with parents, it locks rows InnoDB may scan
    claim = restarted_on_deadlock(DjangoStore.claim)
    report = restarted_on_deadlock(DjangoStore.report)
    heartbeat = restarted_on_deadlock(DjangoStore.heartbeat)
    expire_leases = restarted_on_deadlock(DjangoStore.expire_leases)
    cancel = restarted_on_deadlock(DjangoStore.cancel)
    requeue = restarted_on_deadlock(DjangoStore.requeue)
    pause_queue = restarted_on_deadlock(DjangoStore.pause_queue)
    resume_queue = restarted_on_deadlock(DjangoStore.resume_queue)
    set_concurrency_limit = restarted_on_deadlock(DjangoStore.set_concurrency_limit)
    record_pump = restarted_on_deadlock(DjangoStore.record_pump)

    # -- named locks around queue settings ------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[None]:
        """The portable store's transaction; named locks taken inside it are released once it has ended."""
        stack: list[list[str]] = self._held.__dict__.setdefault("stack", [])
        stack.append([])
        try:
            with super()._write():
                yield
        finally:
            self._release(stack.pop())

    def _take(self, names: Sequence[str]) -> None:
        """Take ``names`` in order, each waiting at most LOCK_WAIT_SECONDS; raise QueueLockTimeout if one
        is not granted. Every name asked for is released when the transaction ends (held or not)."""
        stack = self._held.__dict__.get("stack")
        assert stack, "named locks are taken only inside the store's own transaction"
        for name in names:
            stack[-1].append(name)
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT GET_LOCK(%s, %s)", [name, LOCK_WAIT_SECONDS])
                (granted,) = cursor.fetchone()
            if granted != 1:
                raise QueueLockTimeout(
                    f"backwave waited {LOCK_WAIT_SECONDS} s for a queue's named lock ({name}) and did not "
                    "get it: a claim or an operator change on that queue is taking that long"
                )

    def _release(self, names: list[str]) -> None:
        if not names:
            return
        try:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT " + ", ".join(["RELEASE_LOCK(%s)"] * len(names)), names)
        except DatabaseError:
            # The session may still hold them: end it, so the server frees them (the next call reconnects).
            logger.warning("could not release backwave's named locks; closing the connection to free them")
            with contextlib.suppress(DatabaseError):
                self.connection.close()

    def _slot(self) -> int:
        self.connection.ensure_connection()
        return int(self.connection.connection.thread_id()) % LOCK_SLOTS

    def _lock_queues_for_claim(self, queues: Sequence[str]) -> None:
        database, slot = self.connection.settings_dict["NAME"], self._slot()
        self._take([lock_name(database, q, slot) for q in sorted(set(queues))])  # one order: no deadlock

    def _lock_queue_for_change(self, queue: str) -> None:
        database = self.connection.settings_dict["NAME"]
        self._take([lock_name(database, queue, slot) for slot in range(LOCK_SLOTS)])

    def is_transient_fault(self, exc: BaseException) -> bool:
        return isinstance(exc, QueueLockTimeout) or faults.is_transient(exc)

    # -- statement size -------------------------------------------------------------------------------

    def _insert_batch_size(self, largest_text: int) -> int | None:
        limit = _packet_limits.get(self.using)
        if limit is None:
            limit = _packet_limits[self.using] = max_allowed_packet(self.connection)
        return max(1, (limit - STATEMENT_OVERHEAD) // (4 * largest_text + ROW_OVERHEAD))

    # -- cutting a handler off --------------------------------------------------------------------------

    def cut_off_sessions(self, sessions: Sequence[object]) -> None:
        """Kill the server sessions (``KILL CONNECTION``) of a handler given up on: the server rolls back a
        transaction they hold and stops a statement they run, and the handler's next use of them fails.
        Sessions on this store's server are killed from its own connection, others from a short-lived
        connection of their own. Killing a session needs the same database user (or CONNECTION ADMIN)."""
        super().cut_off_sessions(sessions)  # the handler's SQLite sessions, if it has any
        ours = self.connection.settings_dict
        for session in sessions:
            raw: Any = getattr(session, "connection", None)
            if raw is None or getattr(session, "vendor", "") != "mysql" or not getattr(raw, "open", False):
                continue
            thread_id = int(raw.thread_id())
            theirs = getattr(session, "settings_dict", {})
            if all(theirs.get(key) == ours.get(key) for key in ("HOST", "PORT")):
                self._kill(thread_id)
            else:
                self._kill_elsewhere(session, thread_id)

    def _kill(self, thread_id: int) -> None:
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(KILL, [thread_id])
        except DatabaseError as exc:
            if faults.mysql_code(exc) != NO_SUCH_THREAD:
                raise

    @staticmethod
    def _kill_elsewhere(session: Any, thread_id: int) -> None:
        other = session.get_new_connection(session.get_connection_params())
        try:
            with contextlib.closing(other.cursor()) as cursor:
                cursor.execute(KILL % int(thread_id))
        except Exception as exc:
            if faults.mysql_code(exc) != NO_SUCH_THREAD:
                raise
        finally:
            other.close()
