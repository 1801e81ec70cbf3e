"""A PgBouncer of the test run's own: Debian's binary, started on a free port with a config file written to
a temporary directory (transaction pooling, trust authentication to the local PostgreSQL), stopped after."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: PgBouncer keeps prepared statements in transaction mode from this version on (max_prepared_statements).
PREPARED_SINCE = (1, 21)


def version() -> tuple[int, ...] | None:
    """The installed pgbouncer's version, or None when there is none."""
    binary = shutil.which("pgbouncer")
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"PgBouncer (\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(part) for part in found.groups() if part) if found else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Bouncer:
    port: int
    prepared: bool  # max_prepared_statements is on: psycopg's prepared statements survive pooling
    upstream: tuple[str, int]  # the PostgreSQL server behind it
    directory: Path
    process: subprocess.Popen[bytes]

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # SIGTERM: PgBouncer shuts down at once
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.directory, ignore_errors=True)


def start(*, upstream_host: str, upstream_port: int, prepared: bool) -> Bouncer:
    """A PgBouncer in transaction mode in front of ``upstream_host:upstream_port``; with ``prepared``, with
    ``max_prepared_statements`` (PgBouncer 1.21 or later)."""
    directory = Path(tempfile.mkdtemp(prefix="backwave-pgbouncer-"))
    port = free_port()
    (directory / "userlist.txt").write_text('"postgres" ""\n')
    settings = {
        "listen_addr": "127.0.0.1",
        "listen_port": port,
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": directory / "userlist.txt",
        "pool_mode": "transaction",
        "default_pool_size": 8,
        "max_client_conn": 500,
        "ignore_startup_parameters": "extra_float_digits",
        "logfile": directory / "pgbouncer.log",
        "pidfile": directory / "pgbouncer.pid",
        **({"max_prepared_statements": 200} if prepared else {}),
    }
    lines = ["[databases]", f"* = host={upstream_host} port={upstream_port}", "[pgbouncer]"]
    lines += [f"{key} = {value}" for key, value in settings.items()]
    config = directory / "pgbouncer.ini"
    config.write_text("\n".join(lines) + "\n")
    command = ["pgbouncer", str(config)]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root: it drops to the postgres user itself
        user = pwd.getpwnam("postgres")
        os.chown(directory, user.pw_uid, user.pw_gid)
        for path in directory.iterdir():
            os.chown(path, user.pw_uid, user.pw_gid)
        command[1:1] = ["-u", "postgres"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    upstream = (upstream_host, upstream_port)
    bouncer = Bouncer(port=port, prepared=prepared, upstream=upstream, directory=directory, process=process)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return bouncer
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log = bouncer.log()
                bouncer.stop()
                raise RuntimeError(f"PgBouncer did not start on port {port}:\n{log[-2000:]}") from None
            time.sleep(0.05)
