"""When a failed Attempt runs again: a pure function of the job, the attempt number and ``now``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

MAX_BACKOFF_SECONDS = 30 * 24 * 3600  # thirty days: longer is a schedule, not a retry
MAX_BACKOFF_BASE = 1000.0
#: The largest attempt ceiling a job may have (it is stored as a 32-bit integer everywhere).
MAX_ATTEMPTS_LIMIT = 100_000

_MASK = (1 << 64) - 1


def _unit(key: int, attempt: int) -> float:
    """A number in [0, 1) that depends only on (key, attempt): splitmix64 of the pair. Jitter drawn from it is
    spread across jobs that failed together, yet the same on every replay (the Core has no randomness)."""
    z = (key * 0x9E3779B97F4A7C15 + attempt * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with full jitter: after Attempt ``n`` fails the job waits a share of
    ``min(base ** n, cap)`` seconds, drawn between 0 and all of it (all of it with ``jitter=False``).

    With the defaults (2 and 300 s) the longest waits after attempts 1..9 are 2, 4, 8, ... 256 and 300
    seconds. ``max_attempts`` is the default ceiling for jobs that do not set their own.
    """

    max_attempts: int = 10
    backoff_base: float = 2.0
    backoff_cap: float = 300.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT:
            raise ValueError(f"max_attempts must be 1 to {MAX_ATTEMPTS_LIMIT}, got {self.max_attempts}")
        if not (math.isfinite(self.backoff_base) and 1 <= self.backoff_base <= MAX_BACKOFF_BASE):
            raise ValueError(f"backoff_base must be a number from 1 to {MAX_BACKOFF_BASE:g}")
        if not (math.isfinite(self.backoff_cap) and 0 <= self.backoff_cap <= MAX_BACKOFF_SECONDS):
            raise ValueError(f"backoff_cap must be from 0 to {MAX_BACKOFF_SECONDS} s")

    def backoff(self, failed_attempt: int) -> timedelta:
        """The longest wait after Attempt number ``failed_attempt`` (1-based) failed."""
        exponent = min(max(failed_attempt, 0), 64)
        return timedelta(seconds=min(self.backoff_base**exponent, self.backoff_cap))

    def delay(self, failed_attempt: int, key: int) -> timedelta:
        """The wait for this job (``key``: its id) after ``failed_attempt`` failed."""
        longest = self.backoff(failed_attempt)
        if not self.jitter:
            return longest
        return timedelta(microseconds=int(longest / timedelta(microseconds=1) * _unit(key, failed_attempt)))

    def next_attempt_at(
        self, failed_attempt: int, max_attempts: int, now: datetime, *, key: int = 0
    ) -> datetime | None:
        """When to run again after ``failed_attempt`` failed, or None when the ceiling is reached."""
        if failed_attempt >= max_attempts:
            return None
        return now + self.delay(failed_attempt, key)
