"""``manage.py backwave_purge``: delete finished jobs by BACKWAVE['RETENTION'] (or an age), in batches."""

from __future__ import annotations

import argparse
import re
import time
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from ... import conf
from ...core.names import queue_name_problem
from ...core.retention import MAX_PURGE_BATCH, RetentionRule, purges
from ...models import Job
from ...store import get_store
from .. import arguments

_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The longest --older-than: ten years.
MAX_AGE = timedelta(days=3653)


def age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` or a number of seconds."""
    match = _AGE.fullmatch(text.strip())
    value = float(match[1]) * _UNITS[match[2]] if match else -1.0
    if not 0 < value <= MAX_AGE.total_seconds() or timedelta(seconds=value) <= timedelta(0):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not an age: write a number with s, m, h, d or w (30d, 12h), at most 10 years"
        )
    return timedelta(seconds=value)


def queue(text: str) -> str:
    problem = queue_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


class Command(BaseCommand):
    help = (
        "Delete finished jobs (with their outcomes and audit records) that BACKWAVE['RETENTION'] no longer "
        "keeps, or that finished more than --older-than ago, oldest first, in batches. For operators who "
        "purge from cron; worker maintenance purges the same way on its own."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add = parser.add_argument
        add("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")
        add(
            "--older-than",
            type=age,
            metavar="AGE",
            help="Delete every finished job (any terminal state) older than AGE (30d, 12h, ...), instead of "
            "the retention settings.",
        )
        add(
            "--queue",
            action="append",
            dest="queues",
            type=queue,
            help="Only this queue (repeatable; default: every queue that holds jobs).",
        )
        add("--batch", type=int, default=MAX_PURGE_BATCH, help=f"Jobs per batch ({MAX_PURGE_BATCH}).")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.get()
        # Every option is checked before anything is read: call_command() may pass them past argparse.
        batch = _batch(options["batch"])
        keep = _older_than(options["older_than"])
        named = arguments.repeated(options, "queues", "--queue", queue)
        store = get_store(settings.database)
        queues = tuple(named or _queues_with_jobs(store.using))
        if not queues:
            self.stdout.write("No jobs stored: nothing to purge.")
            return
        if keep is not None:
            rules: tuple[RetentionRule, ...] = (RetentionRule(queues=queues, succeeded=keep, failed=keep),)
        else:
            rules = settings.retention.rules(queues)
        now = timezone.now()
        todo = purges(rules, now)
        for rule in todo:
            states = ", ".join(str(state) for state in rule.states)
            before = f"{rule.before:%Y-%m-%d %H:%M:%S} UTC"
            self.stdout.write(f"{states} finished before {before} in {len(rule.queues)} queue(s)")
        if not todo:
            self.stdout.write("Nothing to purge: retention keeps every finished job of these queues.")
            return
        if options["dry_run"]:
            count = store.purge(todo, max_jobs=1 << 62, dry_run=True)
            self.stdout.write(f"would purge {count:,} finished job(s)")
            return
        started, total, batches = time.monotonic(), 0, 0
        while True:
            purged = store.purge(todo, max_jobs=batch)
            total, batches = total + purged, batches + 1
            if purged < batch:
                break
        elapsed = time.monotonic() - started
        self.stdout.write(f"purged {total:,} finished job(s) in {batches} batch(es), {elapsed:.1f} s")


def _batch(value: object) -> int:
    """--batch as parsed, or as ``call_command()`` passed it (an int, or its text)."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value) < 7:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise CommandError(f"--batch is {value!r}; use 1 to 10000")
    return value


def _older_than(value: object) -> timedelta | None:
    """--older-than as parsed, or as ``call_command()`` passed it past argparse (text, or a timedelta)."""
    if value is None or (isinstance(value, timedelta) and timedelta(0) < value <= MAX_AGE):
        return value
    if isinstance(value, timedelta):
        raise CommandError(f"argument --older-than: {value!r} is not an age from a microsecond to 10 years")
    if not isinstance(value, str):
        raise CommandError(f"argument --older-than: {value!r} is not an age (30d, 12h) or a timedelta")
    try:
        return age(value)
    except argparse.ArgumentTypeError as exc:
        raise CommandError(f"argument --older-than: {exc}") from None


def _queues_with_jobs(using: str) -> list[str]:
    return sorted(Job.objects.using(using).values_list("queue", flat=True).distinct())
