"""``manage.py backwave_torture``: prove nothing is lost while worker processes are killed, their database
connections terminated and their processes paused past their leases. See docs/howto/torture.md."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection, connections
from django.utils import timezone

from backwave_django import set_concurrency_limit
from backwave_django.core.text import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES
from backwave_django.models import Job, Lease, Outcome, PumpStatus
from backwave_django.store.contract import MAX_HEALTH_DETAIL_BYTES
from torture import jobs
from torture.models import Execution

LIMIT = 2
MANAGE = Path(__file__).resolve().parents[3] / "manage.py"
TERMINAL = {"succeeded", "cancelled", "dead_lettered", "quarantined"}
#: The other client sessions on this database, and how to end one, by Django vendor.
OTHER_SESSIONS = {
    "postgresql": "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
    "mysql": "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID() "
    "AND COMMAND NOT IN ('Daemon', 'Binlog Dump')",
}
TERMINATE = {"postgresql": "SELECT pg_terminate_backend(%s)", "mysql": "KILL CONNECTION %s"}


def group_settings(lease: float) -> dict[str, Any]:
    return {
        "GROUPS": {
            "torture": {
                "QUEUES": ["torture", jobs.LIMITED_QUEUE],
                "POOL_SIZE": 8,
                "POLL_INTERVAL": 0.1,
                "LEASE_DURATION": lease,
                "HEARTBEAT_INTERVAL": lease / 4,
                "MAINTENANCE_INTERVAL": 0.25,
                "SHUTDOWN_GRACE": 5,
            }
        },
        "RETRY": {"BACKOFF_BASE": 1.0, "BACKOFF_CAP": 0.2},
    }


class Fleet:
    """The worker processes, with what happened to them."""

    def __init__(self, size: int, lease: float, logs: Path, report_faults: float = 0.0) -> None:
        self.env = {
            **os.environ,
            "BACKWAVE_JSON": json.dumps(group_settings(lease)),
            "BACKWAVE_LOG_LEVEL": "INFO",
            "BACKWAVE_TORTURE_REPORT_FAULTS": str(report_faults),
        }
        self.logs = logs
        self.hit: set[int] = set()  # pids of workers killed or paused: their unreported successes may expire
        self.started = 0
        self.log_files: list[Any] = []
        self.procs: list[subprocess.Popen[bytes]] = [self.spawn() for _ in range(size)]

    def spawn(self) -> subprocess.Popen[bytes]:
        self.started += 1
        log = open(self.logs / f"worker-{self.started}.log", "wb")  # noqa: SIM115 (closed in stop())
        self.log_files.append(log)
        command = [sys.executable, str(MANAGE), "backwave_pump", "--group", "torture"]
        return subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def replace(self, index: int) -> None:
        self.procs[index] = self.spawn()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self.log_files:
            log.close()


class Command(BaseCommand):
    help = "Run the torture run: faults against real worker processes, then an audit of every invariant."

    def add_arguments(self, parser: CommandParser) -> None:
        add = parser.add_argument
        add("--jobs", type=int, default=3000, help="Jobs of all kinds (3000).")
        add("--workers", type=int, default=3, help="Worker processes kept running (3).")
        add("--duration", type=float, default=40.0, help="Seconds of faults (40).")
        add("--lease", type=float, default=2.0, help="LEASE_DURATION of the workers, seconds (2).")
        add("--seed", type=int, default=None, help="Fault schedule seed (printed; default: random).")
        add("--drain-timeout", type=float, default=180.0, help="Seconds allowed to drain after the faults.")
        add("--logs", default=None, help="Folder for the workers' logs (default: a temporary folder).")
        add(
            "--hostile",
            action="store_true",
            help="Mix in hostile jobs (unstorable failure text, undecodable rows, handlers that hang past "
            "their timeout) and transient faults on 5%% of outcome writes.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        seed = options["seed"] if options["seed"] is not None else random.randrange(2**32)
        rng = random.Random(seed)
        logs = Path(options["logs"] or f"/tmp/backwave-torture-{seed}")
        logs.mkdir(parents=True, exist_ok=True)
        self.stdout.write(f"seed {seed}; worker logs in {logs}")
        self.reset()
        hostile = options["hostile"]
        expected = self.enqueue(options["jobs"], rng, hostile)
        fleet = Fleet(options["workers"], options["lease"], logs, report_faults=0.05 if hostile else 0.0)
        sampler = LimitSampler()
        sampler.start()
        try:
            counts = self.faults(fleet, rng, options["duration"], options["lease"])
            drained = self.drain(options["drain_timeout"])
        finally:  # never leave workers behind, whatever happened
            sampler.stop()
            fleet.stop()
        connection.close()
        failures = self.audit(expected, sampler.peak, logs, drained, fleet.hit)
        summary = (
            f"{len(expected)} jobs{' (hostile)' if hostile else ''}, {counts['kills']} kills, "
            f"{counts['terminations']} terminations, {counts['stale']} stale writers: "
            f"{failures['lost']} lost, {failures['double']} double outcomes, "
            f"{failures['unexplained']} unexplained executions, {failures['wrong']} in the wrong state, "
            f"peak {sampler.peak}/{LIMIT} leased in the limited queue, {failures['halted']} halted pumps, "
            f"{failures['leased']} left leased, {failures['charged']} successes charged an attempt, "
            f"{failures['text']} unbounded texts"
        )
        self.stdout.write(summary)
        if any(failures.values()) or sampler.peak > LIMIT:
            raise CommandError(f"invariants failed; replay with --seed {seed}")

    # -- setup ---------------------------------------------------------------------------------------

    def reset(self) -> None:
        queues = ["torture", jobs.LIMITED_QUEUE]
        Outcome.objects.filter(job__queue__in=queues).delete()
        Lease.objects.filter(queue__in=queues).delete()
        Job.objects.filter(queue__in=queues).delete()
        Execution.objects.all().delete()
        PumpStatus.objects.filter(group="torture").delete()
        set_concurrency_limit(jobs.LIMITED_QUEUE, LIMIT, actor="backwave_torture")

    def enqueue(self, total: int, rng: random.Random, hostile: bool = False) -> dict[int, str]:
        """Enqueue the mix; returns the state each job must end in."""
        mix = {"fast": 50, "slow": 10, "flaky": 15, "doomed": 5, "limited": 15, "unknown": 5}
        if hostile:
            mix.update({"hostile-text": 3, "undecodable": 3, "hung": 1})
        kinds = Counter(rng.choices(list(mix), list(mix.values()), k=total))
        expected: dict[int, str] = {}
        for job in jobs.fast.enqueue_many([{}] * kinds["fast"]):
            expected[job.id] = "succeeded"
        for job in jobs.slow.enqueue_many([{"seconds": rng.uniform(0.2, 1.5)} for _ in range(kinds["slow"])]):
            expected[job.id] = "succeeded"
        for job in jobs.flaky.enqueue_many(
            [{"fail_times": rng.randint(1, 3)} for _ in range(kinds["flaky"])]
        ):
            expected[job.id] = "succeeded"
        for job in jobs.doomed.enqueue_many([{}] * kinds["doomed"]):
            expected[job.id] = "dead_lettered"
        for job in jobs.limited.enqueue_many([{}] * kinds["limited"]):
            expected[job.id] = "succeeded"
        now = timezone.now()
        unknown = Job.objects.bulk_create(
            Job(wire_name="torture.retired", queue="torture", payload="{}", due_at=now, created_at=now)
            for _ in range(kinds["unknown"])
        )  # rows an older deployment might have left: no handler is registered for them
        expected.update(dict.fromkeys((job.id for job in unknown), "quarantined"))
        if hostile:
            expected.update(self.enqueue_hostile(kinds, rng))
        self.stdout.write(f"enqueued {total} jobs: {dict(sorted(kinds.items()))}")
        return expected

    def enqueue_hostile(self, kinds: Counter[str], rng: random.Random) -> dict[int, str]:
        expected: dict[int, str] = {}
        skus = [{"sku": f"\x00{rng.randrange(10**6)}\x00"} for _ in range(kinds["hostile-text"])]
        for job in jobs.hostile_text.enqueue_many(skus):
            expected[job.id] = "dead_lettered"
        hung = jobs.hung.using(timeout=1.0).enqueue_many([{"seconds": 6.0}] * kinds["hung"])
        expected.update(dict.fromkeys((job.id for job in hung), "dead_lettered"))
        now = timezone.now()
        payloads = [
            '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
            '{"a": ' + "7" * 5000 + "}",
            '{"a": {"$bw": "timedelta", "v": [999999999999, 0, 0]}}',
        ]
        undecodable = Job.objects.bulk_create(
            Job(
                wire_name="torture.fast", queue="torture", payload=payloads[n % 3], due_at=now, created_at=now
            )
            for n in range(kinds["undecodable"])
        )  # rows another service or an older deployment might have written: they must be quarantined
        expected.update(dict.fromkeys((job.id for job in undecodable), "quarantined"))
        return expected

    # -- faults --------------------------------------------------------------------------------------

    def faults(self, fleet: Fleet, rng: random.Random, duration: float, lease: float) -> Counter[str]:
        counts: Counter[str] = Counter()
        paused: dict[int, float] = {}  # worker index -> when to resume it
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.2, 1.2))
            for index, resume_at in list(paused.items()):
                if time.monotonic() >= resume_at:
                    fleet.procs[index].send_signal(signal.SIGCONT)  # it wakes up holding stale leases
                    del paused[index]
            fault = rng.choice(["kill", "terminate", "terminate", "pause"])
            index = rng.randrange(len(fleet.procs))
            if fault == "kill" and index not in paused:
                fleet.hit.add(fleet.procs[index].pid)
                fleet.procs[index].kill()
                fleet.procs[index].wait()
                fleet.replace(index)
                counts["kills"] += 1
            elif fault == "terminate":
                counts["terminations"] += self.terminate_a_connection(rng)
            elif fault == "pause" and index not in paused and len(paused) < len(fleet.procs) - 1:
                fleet.hit.add(fleet.procs[index].pid)
                fleet.procs[index].send_signal(signal.SIGSTOP)
                paused[index] = time.monotonic() + lease * rng.uniform(1.5, 3.0)
                counts["stale"] += 1
        for index in paused:
            fleet.procs[index].send_signal(signal.SIGCONT)
        return counts

    def terminate_a_connection(self, rng: random.Random) -> int:
        try:
            return self._terminate_one(rng)
        except DatabaseError:  # the server restarting under us (the optional restart mode, or an operator)
            connection.close()
            return 0

    def _terminate_one(self, rng: random.Random) -> int:
        """Terminate one other client connection to this database: pg_terminate_backend on PostgreSQL,
        KILL CONNECTION on MariaDB (the server rolls back what it held, as PostgreSQL does)."""
        with connection.cursor() as cursor:
            cursor.execute(OTHER_SESSIONS[connection.vendor])
            pids = [row[0] for row in cursor.fetchall()]
            if not pids:
                return 0
            cursor.execute(TERMINATE[connection.vendor], [rng.choice(pids)])
        return 1

    def drain(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        live = Job.objects.filter(queue__in=["torture", jobs.LIMITED_QUEUE]).exclude(state__in=TERMINAL)
        while time.monotonic() < deadline:
            try:
                if not live.exists():
                    return True
            except DatabaseError:  # a server restart under us: reconnect and look again
                connection.close()
            time.sleep(0.5)
        return False

    # -- audit ---------------------------------------------------------------------------------------

    def audit(
        self, expected: dict[int, str], peak: int, logs: Path, drained: bool, hit: set[int]
    ) -> dict[str, int]:
        rows = {j.id: j for j in Job.objects.filter(id__in=list(expected))}
        outcomes: dict[int, list[Outcome]] = defaultdict(list)
        for outcome in Outcome.objects.filter(job_id__in=list(expected)).order_by("id"):
            outcomes[outcome.job_id].append(outcome)
        executions = Counter(Execution.objects.values_list("job_id", "attempt"))
        failures: Counter[str] = Counter()

        def check(name: str, bad: list[Any]) -> None:
            failures[name] += len(bad)
            verdict = "ok" if not bad else f"FAILED for {len(bad)}: {bad[:10]}"
            self.stdout.write(f"  {name:<12} {verdict}")

        self.stdout.write(f"audit ({'drained' if drained else 'NOT drained in time'}):")
        check("lost", [i for i in expected if i not in rows or rows[i].state not in TERMINAL])
        check(
            "wrong",
            [
                (i, rows[i].state)
                for i in expected
                if i in rows and rows[i].state in TERMINAL and rows[i].state != expected[i]
            ],
        )
        check("double", [i for i in expected if sum(o.state_after in TERMINAL for o in outcomes[i]) > 1])
        ceiling = [
            i
            for i in expected
            if expected[i] == "dead_lettered" and i in rows and rows[i].attempt != rows[i].max_attempts
        ]
        check("ceiling", ceiling)
        counted = [
            i
            for i in expected
            if i in rows and rows[i].attempt != sum(o.kind != "released" for o in outcomes[i])
        ]
        check("attempts", counted)
        # Every execution journaled must be accounted for by the Outcome of its Attempt (a handler that ran
        # and was then cut off by an expired or released lease is explained; one with no Outcome is not).
        by_attempt = {(o.job_id, o.attempt): o for i in outcomes for o in outcomes[i]}
        released = Counter(
            (o.job_id, o.attempt) for i in outcomes for o in outcomes[i] if o.kind == "released"
        )
        unexplained = [
            key for key, n in executions.items()
            if key[0] in expected and (key not in by_attempt or n > 1 + released[key])
        ]  # fmt: skip
        check("unexplained", unexplained)
        extra = sum(
            n
            for key, n in executions.items()
            if key in by_attempt and by_attempt[key].kind in ("expired", "released")
        )
        self.stdout.write(
            f"  {'limit':<12} {'ok' if peak <= LIMIT else 'FAILED'}: "
            f"at most {peak} leased at once (limit {LIMIT})"
        )
        halted = list(
            PumpStatus.objects.filter(group="torture", health="halted").values_list("worker_id", "detail")
        )
        halted += [(log.name, "halted") for log in logs.glob("*.log") if b"halted by" in log.read_bytes()]
        check("halted", halted)
        check("leased", [i for i in expected if i in rows and rows[i].state == "leased"])
        # A handler that returned on a worker never killed nor paused must not lose its Attempt: a transient
        # fault on its outcome write is retried while its lease holds (the fence discards a duplicate).
        finished = Execution.objects.filter(job_id__in=list(expected), finished=True)
        charged = [
            key
            for key, worker in ((e[:2], e[2]) for e in finished.values_list("job_id", "attempt", "worker"))
            if key in by_attempt
            and by_attempt[key].kind == "expired"
            and int(worker.split(":")[1]) not in hit
        ]
        check("charged", charged)
        check("text", self.unbounded_texts(list(expected)))
        self.stdout.write(f"  ({extra} extra executions, each explained by an expired or released lease)")
        wrong = failures["wrong"] + failures["ceiling"] + failures["attempts"]
        names = ("lost", "double", "unexplained", "halted", "leased", "charged", "text")
        return {**{name: failures[name] for name in names}, "wrong": wrong}

    def unbounded_texts(self, ids: list[int]) -> list[tuple[str, int | str]]:
        """Stored text must be storable by every database and within its bound: each job's terminal cause,
        each outcome's message and traceback, and the torture Pumps' health details."""
        bad: list[tuple[str, int | str]] = []
        for job_id, cause in Job.objects.filter(id__in=ids).values_list("id", "terminal_cause"):
            if not storable(cause, MAX_MESSAGE_BYTES):
                bad.append(("terminal_cause", job_id))
        outcomes = Outcome.objects.filter(job_id__in=ids).values_list("job_id", "message", "detail")
        for job_id, message, detail in outcomes:
            if not storable(message, MAX_MESSAGE_BYTES):
                bad.append(("message", job_id))
            if not storable(detail, MAX_DETAIL_BYTES):
                bad.append(("detail", job_id))
        for worker, detail in PumpStatus.objects.filter(group="torture").values_list("worker_id", "detail"):
            if not storable(detail, MAX_HEALTH_DETAIL_BYTES):
                bad.append(("pump detail", worker))
        return bad


def storable(text: str, max_bytes: int) -> bool:
    """No NUL (PostgreSQL refuses it, MariaDB and SQLite keep it), no lone surrogate (no UTF-8 encoder takes
    one), and at most ``max_bytes`` bytes of UTF-8."""
    if "\x00" in text:
        return False
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(encoded) <= max_bytes


class LimitSampler(threading.Thread):
    """Samples how many jobs of the limited queue are leased, on its own connection, every 20 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self._stop = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop.wait(0.02):
                try:
                    self.peak = max(self.peak, Lease.objects.filter(queue=jobs.LIMITED_QUEUE).count())
                except Exception:  # our own connection may be among those the faults terminate
                    connections["default"].close()
        finally:
            connections["default"].close()

    def stop(self) -> None:
        self._stop.set()
        self.join()
