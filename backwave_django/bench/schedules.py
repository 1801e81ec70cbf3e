"""The schedule figure of ``manage.py backwave_bench``: a year of an hourly schedule through the test pump on
a virtual clock and the in-memory store, so the cost is the production Node Driver's, the planner's and
croniter's, with no database. Every tick is minted, claimed, run and reported, one by one."""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import codec
from ..core.schedules import Misfire
from ..store.contract import ScheduleDefinition
from ..store.memory import MemoryStore
from ..testing import TestPump
from . import jobs

QUEUE = "bwbench-schedule"
START = datetime(2026, 1, 1, tzinfo=UTC)
YEAR = timedelta(days=365)


def year_of_hourly() -> tuple[float, int]:
    """Seconds to run a year of ``0 * * * *`` and the number of jobs it ran."""
    noop = jobs.register().noop
    store = MemoryStore()
    hourly = ScheduleDefinition(
        name="bench-hourly", wire_name=noop.registration.wire_name, queue=QUEUE, payload=codec.encode({}),
        cron="0 * * * *", every=None, timezone="UTC", misfire=Misfire.SKIP, no_overlap=False, max_attempts=1,
        timeout=None,
    )  # fmt: skip
    store.sync_schedules([hourly], now=START)
    started = time.perf_counter()
    pump = TestPump(start=START, store=store, queues=[QUEUE], schedules=False)
    ran = pump.advance(YEAR)
    return time.perf_counter() - started, len(ran)


def schedule_rates(runs: int) -> dict[str, Any]:
    """The median of ``runs`` years of an hourly schedule, after one discarded warm-up."""
    year_of_hourly()
    timed = [year_of_hourly() for _ in range(runs)]
    seconds = [s for s, _ in timed]
    return {
        "jobs": timed[0][1],
        "seconds": statistics.median(seconds),
        "runs": [round(s, 3) for s in seconds],
        "jobs_per_s": timed[0][1] / statistics.median(seconds),
    }
