"""Wake-up hints across processes on PostgreSQL: one LISTEN connection per process.

Enqueue sends ``NOTIFY <channel>, '<queue>'`` inside its transaction (the channel is
``BACKWAVE['HINT_CHANNEL']``), so the hint fires only on commit. This thread turns each notification into an
in-process hint (``wakeups.publish``), which the Pumps serving that queue turn into a poll. Hints only cut
latency: if this connection dies, Pumps still poll at POLL_INTERVAL, and the listener reconnects after
``reconnect_delay``.

It listens on ``BACKWAVE['LISTEN_DATABASE']`` when that is set: behind a pooler in transaction mode
(PgBouncer's ``pool_mode = transaction``) a LISTEN ends with its transaction, when the pooler hands the server
connection to another client, so notifications never reach it. Each new connection proves itself first: it
listens on a probe channel of its own and notifies it from a second connection; when nothing arrives within
:data:`PROBE_SECONDS`, the listener says so once, loudly, and stops: the Pumps then find other processes'
jobs by polling alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from typing import Any

from django.db import connections

from .. import conf, wakeups

logger = logging.getLogger("backwave.hints")

#: How long a new LISTEN connection may take to hear its own probe notification.
PROBE_SECONDS = 3.0
#: The longest the thread waits for a notification or a stop before it looks again (a stop wakes it at once).
WAIT_SECONDS = 5.0


class HintListener:
    def __init__(
        self, using: str | None = None, *, channel: str | None = None, reconnect_delay: float = 5.0
    ) -> None:
        self.using = using or conf.get().listen_alias
        self.channel = channel or conf.get().hint_channel
        self.reconnect_delay = reconnect_delay
        self.connected = threading.Event()
        self.unusable = threading.Event()  # the probe failed: notifications cannot reach this connection
        self.backend_pid: int | None = None
        self.received = 0
        self._stop = threading.Event()
        # Stopping writes a byte to this pipe: the thread waits on it beside its connection, so a stop (the
        # end of every --burst run) takes effect at once, not at the end of a wait for notifications.
        self._wake: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._run, name="backwave-hints", daemon=True)

    def start(self) -> None:
        self._wake = os.pipe()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._wake is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake[1], b"x")
        self._thread.join(timeout=5)
        if self._wake is not None and not self._thread.is_alive():
            for end in self._wake:
                with contextlib.suppress(OSError):
                    os.close(end)
            self._wake = None

    def _open(self) -> Any:
        import psycopg

        wrapper = connections[self.using]
        params = wrapper.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        return psycopg.connect(**params, autocommit=True)

    def _connect(self) -> Any:
        conn = self._open()
        try:
            if not self._probe(conn):
                self.unusable.set()
                raise ConnectionRefusedError("notifications do not reach this connection")
            conn.execute(f"LISTEN {self.channel}")  # conf checked it is a plain identifier
        except BaseException:
            conn.close()
            raise
        return conn

    def _probe(self, conn: Any) -> bool:
        """Whether a notification sent from another connection reaches this one."""
        probe = f"backwave_probe_{conn.info.backend_pid}"[:63]
        conn.execute(f"LISTEN {probe}")
        with self._open() as other:
            other.execute("SELECT pg_notify(%s, '')", [probe])
        heard = any(True for _ in conn.notifies(timeout=PROBE_SECONDS, stop_after=1))
        conn.execute(f"UNLISTEN {probe}")
        return heard

    def _run(self) -> None:
        assert self._wake is not None  # start() made it
        wake = self._wake[0]
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except Exception as exc:
                if self.unusable.is_set():
                    logger.warning(
                        "wake-up hints from other processes are OFF: a LISTEN on database alias %r never "
                        "hears a NOTIFY (a pooler in transaction mode, such as PgBouncer?). Pumps find their "
                        "jobs by polling (POLL_INTERVAL). Set BACKWAVE['LISTEN_DATABASE'] to an alias that "
                        "connects directly to PostgreSQL.",
                        self.using,
                    )
                    return
                logger.warning("hint listener cannot connect (polling continues): %s", exc)
                self._stop.wait(self.reconnect_delay)
                continue
            self.backend_pid = conn.info.backend_pid
            self.connected.set()
            try:
                while not self._stop.is_set():
                    select.select([conn.fileno(), wake], [], [], WAIT_SECONDS)
                    for notify in conn.notifies(timeout=0):  # whatever has arrived, without waiting
                        self.received += 1
                        wakeups.publish([notify.payload])
            except Exception as exc:
                if not self._stop.is_set():
                    logger.warning("hint listener lost its connection, reconnecting: %s", exc)
            finally:
                self.connected.clear()
                with contextlib.suppress(Exception):
                    conn.close()
            self._stop.wait(self.reconnect_delay)
