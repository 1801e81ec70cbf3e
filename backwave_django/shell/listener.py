"""Wake-up hints across processes on PostgreSQL: one LISTEN connection per process.

Enqueue sends ``NOTIFY backwave, '<queue>'`` inside its transaction, so the hint fires only on commit. This
thread turns each notification into an in-process hint (``wakeups.publish``), which the Pumps serving that
queue turn into a poll. Hints only cut latency: if this connection dies, Pumps still poll at POLL_INTERVAL,
and the listener reconnects after ``reconnect_delay``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from django.db import connections

from .. import wakeups
from ..store.contract import HINT_CHANNEL

logger = logging.getLogger("backwave.hints")


class HintListener:
    def __init__(self, using: str = "default", *, reconnect_delay: float = 5.0) -> None:
        self.using = using
        self.reconnect_delay = reconnect_delay
        self.connected = threading.Event()
        self.backend_pid: int | None = None
        self.received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="backwave-hints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _connect(self) -> Any:
        import psycopg

        wrapper = connections[self.using]
        params = wrapper.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        conn = psycopg.connect(**params, autocommit=True)
        conn.execute(f"LISTEN {HINT_CHANNEL}")
        return conn

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except Exception as exc:
                logger.warning("hint listener cannot connect (polling continues): %s", exc)
                self._stop.wait(self.reconnect_delay)
                continue
            self.backend_pid = conn.info.backend_pid
            self.connected.set()
            try:
                while not self._stop.is_set():
                    for notify in conn.notifies(timeout=0.5):
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
