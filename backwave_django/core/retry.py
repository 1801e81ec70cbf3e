"""When a failed Attempt runs again: a pure function of the attempt number and ``now``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

MAX_BACKOFF_SECONDS = 30 * 24 * 3600  # thirty days: longer is a schedule, not a retry


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff: attempt ``n`` that failed waits ``min(base ** n, cap)`` seconds.

    With the defaults (2 and 300 s) attempts 1..9 wait 2, 4, 8, ... 256 and 300 seconds.
    ``max_attempts`` is the default ceiling for jobs that do not set their own.
    """

    max_attempts: int = 10
    backoff_base: float = 2.0
    backoff_cap: float = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.backoff_base < 1 or not 0 <= self.backoff_cap <= MAX_BACKOFF_SECONDS:
            raise ValueError(
                f"backoff_base must be >= 1 and backoff_cap between 0 and {MAX_BACKOFF_SECONDS} s"
            )

    def backoff(self, failed_attempt: int) -> timedelta:
        """How long to wait after Attempt number ``failed_attempt`` (1-based) failed."""
        exponent = min(max(failed_attempt, 0), 64)
        return timedelta(seconds=min(self.backoff_base**exponent, self.backoff_cap))

    def next_attempt_at(self, failed_attempt: int, max_attempts: int, now: datetime) -> datetime | None:
        """When to run again after ``failed_attempt`` failed, or None when the ceiling is reached."""
        if failed_attempt >= max_attempts:
            return None
        return now + self.backoff(failed_attempt)
