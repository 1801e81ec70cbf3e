"""Simulated handlers and the worker pool they run in.

An Attempt's behaviour is decided when it is launched: by default it succeeds after its job's duration and
stops soon after it is asked to; faults make it fail (with plain or hostile text), run slowly, or hang past
its time limit, deaf to cancellation. :class:`Pool` mirrors ``shell.workers.WorkerPool``: ``pool_size``
threads, a queue for Attempts that find none free, and a replacement thread for each one stuck in an
abandoned handler (up to ``pool_size`` at a time), reported to the Driver as ``ThreadsAbandoned``.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..core import events as ev
from ..core.records import ClaimedJob
from .plan import FaultPlan, Params
from .timeline import us

if TYPE_CHECKING:
    from .executor import Executor
    from .pump import SimPump

#: Texts no database stores as they are: the store must clean and bound them.
HOSTILE_TEXTS = (
    "boom\x00with a NUL",
    "a lone surrogate \ud800 here",
    "\udc80" * 3 + " mixed \x00 " + "é" * 50,
    "huge " + "é" * 40_000 + "\ud83d",
    "x" * 300_000,
)
CANCELLED_MESSAGE = "JobCancelled: the Attempt was asked to stop"


@dataclass(slots=True, eq=False)
class Attempt:
    """One handler run of a claimed job."""

    job: ClaimedJob
    duration: int  # microseconds it runs when left alone
    message: str | None  # its failure message, or None when it returns
    deaf: bool  # it ignores cancellation (a hang)
    react: int  # microseconds it takes to stop once asked
    output: str | None = None  # what it returns, as JSON text (None: it returns nothing)
    limit_at: datetime | None = None  # when its time limit passes, on its Pump's clock
    signalled: bool = False
    abandoned: bool = False
    started: int | None = None
    ends: int | None = None
    done: bool = False

    @property
    def detail(self) -> str:
        """The traceback the executor keeps for a failed Attempt."""
        return f"Traceback (most recent call last):\n  handler of job {self.job.id}\n{self.message}"


def behaviour(plan: FaultPlan, job: ClaimedJob, site: str, duration: float) -> Attempt:
    """How this run of the job behaves: every fault kind is asked once at the job's ``site`` (the job, or
    the schedule whose run it is), so each keeps its address."""
    fail = plan.flag("handler-fail", site)
    hostile = plan.decide("handler-hostile", site, _hostile)
    slow = plan.decide("handler-slow", site, lambda rng: {"factor": round(rng.uniform(5, 60), 2)})
    hang = plan.decide("handler-hang", site, lambda rng: {"seconds": round(rng.uniform(20, 240), 3)})
    seconds = duration * float(slow["factor"]) if slow else duration
    if hang:
        seconds = float(hang["seconds"])
    message = None
    if hostile:
        message = HOSTILE_TEXTS[int(hostile["text"]) % len(HOSTILE_TEXTS)]
    elif fail:
        message = f"RuntimeError: simulated failure of job {job.id} attempt {job.attempt}"
    return Attempt(job=job, duration=us(seconds), message=message, deaf=hang is not None, react=us(0.05))


def _hostile(rng: random.Random) -> Params:
    return {"text": rng.randrange(len(HOSTILE_TEXTS))}


class Pool:
    def __init__(self, pump: SimPump, executor: Executor, size: int) -> None:
        self.pump, self.executor = pump, executor
        self.size = size
        self.threads = size
        self.busy = 0
        self.stuck = 0  # threads running an abandoned handler
        self.replaced = 0  # replacements started for stuck threads and not yet retired
        self.waiting: deque[Attempt] = deque()

    def submit(self, attempt: Attempt) -> None:
        if self.busy < self.threads:
            self._start(attempt)
        else:
            self.waiting.append(attempt)

    def _start(self, attempt: Attempt) -> None:
        self.busy += 1
        if attempt.abandoned:  # given up on before a thread took it: it ends at once
            self._end(attempt)
            return
        timeline = self.pump.sim.timeline
        attempt.started = timeline.now
        self._end_at(attempt, timeline.now + attempt.duration)

    def _end_at(self, attempt: Attempt, when: int) -> None:
        attempt.ends = when
        self.pump.sim.timeline.at(when, self._ended, attempt, when)

    def signal(self, attempt: Attempt) -> None:
        """Its cancellation signal fires: a handler that listens stops ``react`` later."""
        attempt.signalled = True
        if attempt.deaf or attempt.started is None or attempt.done or attempt.ends is None:
            return
        soon = self.pump.sim.timeline.now + attempt.react
        if soon < attempt.ends:
            self._end_at(attempt, soon)

    def _ended(self, attempt: Attempt, when: int) -> None:
        if attempt.done or when != attempt.ends or not self.pump.alive:
            return
        self._end(attempt)

    def _end(self, attempt: Attempt) -> None:
        attempt.done = True
        self.busy -= 1
        ran = (attempt.ends or 0) - (attempt.started or 0)
        stopped_early = attempt.signalled and attempt.started is not None and ran < attempt.duration
        self.executor.ended(attempt, CANCELLED_MESSAGE if stopped_early else attempt.message)
        if attempt.abandoned:
            self._retire()
        while self.waiting and self.busy < self.threads:
            self._start(self.waiting.popleft())

    def abandoned(self) -> None:
        """A running handler was given up on: replace its thread, if the cap allows."""
        self.stuck += 1
        if self.replaced < self.size:
            self.replaced += 1
            self.threads += 1
        self._changed()
        while self.waiting and self.busy < self.threads:
            self._start(self.waiting.popleft())

    def _retire(self) -> None:
        self.stuck -= 1
        if self.replaced > 0:
            self.replaced -= 1
            self.threads -= 1
        self._changed()

    def _changed(self) -> None:
        now = self.pump.wall()
        self.pump.post(
            ev.ThreadsAbandoned(now=now, running=self.stuck, unreplaced=self.stuck - self.replaced)
        )
