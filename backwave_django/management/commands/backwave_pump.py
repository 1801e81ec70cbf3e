"""Run worker groups: ``manage.py backwave_pump --group default [--group other ...] [--burst]``."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from typing import Any

from django.conf import settings as django_settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ... import conf
from ...checks import worker_connection_problems
from ...core.health import GroupHealth
from ...shell.node import TICK, Node
from .. import arguments

#: --grace overrides SHUTDOWN_GRACE, so it has the same range; --burst-horizon looks up to a day ahead.
GRACE_MAX, HORIZON_MAX = conf.SHUTDOWN_GRACE.high, conf.DAY
GRACE = arguments.seconds_between(conf.SHUTDOWN_GRACE.low, GRACE_MAX)
BURST_HORIZON = arguments.seconds_between(0, HORIZON_MAX)
#: With --burst, once the Pumps are idle, at most how often the command asks the database whether anything
#: is due within the horizon (it looks at its Pumps every TICK: a burst run ends within TICK of its last
#: outcome).
LOOK_EVERY = 0.2


class Command(BaseCommand):
    help = (
        "Run the Pumps of the named worker groups in this process until SIGTERM/SIGINT "
        "(or, with --burst, until idle)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--group",
            action="append",
            dest="groups",
            help="Worker group to run (repeatable; default: every group).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Exit once nothing runs and nothing is due within --burst-horizon.",
        )
        parser.add_argument(
            "--burst-horizon",
            type=BURST_HORIZON,
            metavar="SECONDS",
            default=60.0,
            help=f"Seconds ahead that --burst still waits for due work, 0 to {HORIZON_MAX:g} (default 60).",
        )
        parser.add_argument(
            "--grace",
            type=GRACE,
            metavar="SECONDS",
            default=None,
            help=f"Seconds running jobs may finish at shutdown, 0 to {GRACE_MAX:g} (default: the longest "
            "SHUTDOWN_GRACE).",
        )
        parser.add_argument("--no-hints", action="store_true", help="Poll only; ignore wake-up hints.")

    def run_from_argv(self, argv: list[str]) -> None:
        """As a process (``manage.py backwave_pump``): once the command has ended, the interpreter's last
        garbage collection is skipped over what Django loaded (a third of a second on a slow core, at every
        exit). Atexit handlers, such as an OpenTelemetry exporter's flush, still run."""
        try:
            super().run_from_argv(argv)
        finally:
            gc.freeze()

    def _warn_about_connections(self, alias: str) -> None:
        silenced = set(django_settings.SILENCED_SYSTEM_CHECKS)
        for warning in worker_connection_problems(alias, connections.settings.get(alias, {})):
            if warning.id not in silenced:
                self.stderr.write(f"{warning}")

    def handle(self, *args: Any, **options: Any) -> None:
        grace = arguments.given(options, "grace", GRACE)
        horizon = arguments.given(options, "burst_horizon", BURST_HORIZON)
        settings = conf.get()
        groups = arguments.repeated(options, "groups", "--group") or list(settings.groups)
        self._warn_about_connections(settings.database)
        try:
            node = Node(groups, hints=False if options["no_hints"] else None)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        stop = threading.Event()
        signals_seen = 0

        def on_signal(signum: int, frame: Any) -> None:
            nonlocal signals_seen
            signals_seen += 1
            if signals_seen > 1:
                self.stderr.write("second signal: exiting at once")
                os._exit(1)
            self.stderr.write(f"{signal.Signals(signum).name}: draining (send again to exit at once)")
            stop.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        started = time.monotonic()
        node.start()
        try:
            looked = -LOOK_EVERY
            while not stop.wait(TICK):
                if not node.alive:
                    break
                node.adapt()
                if not options["burst"] or node.busy:
                    continue
                if time.monotonic() - looked >= LOOK_EVERY:  # the look asks the database
                    looked = time.monotonic()
                    if node.idle(horizon or 0):
                        break
            stuck = node.stop(grace)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        elapsed = time.monotonic() - started
        processed = node.processed
        for status in node.health():
            self.stdout.write(f"group {status.group}: {status.state}, {status.pumps} pump(s)")
        self.stdout.write(f"backwave_pump: {processed} outcomes applied in {elapsed:.1f} s")
        halted = any(status.state == GroupHealth.HALTED for status in node.health())
        if stuck:
            # Handlers that ignored every request to stop are cut off from the database and their jobs
            # given back; ending the process is the only way to end them (an open transaction rolls back).
            self.stderr.write(f"backwave_pump: {stuck} handler thread(s) did not stop; ending the process")
            self.stdout.flush()
            self.stderr.flush()
            os._exit(1 if halted else 0)
        if halted:
            raise CommandError("a worker group halted; see the log above")
