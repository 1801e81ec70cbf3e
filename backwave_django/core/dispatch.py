"""Dispatch policies: which queues a claim asks for, in which order, and how many jobs from each.

``Strict`` asks for every queue in priority order in one claim: the store fills from the first queue before
the second (work-conserving; tail queues may starve, by design). ``Weighted`` shares the free slots by smooth
weighted round-robin: one claim per queue that won slots, that queue first and the others after it, so an
empty queue's share flows to busy ones. Credit is charged only for claims actually issued.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .values import value


@value
class PlannedClaim:
    """One claim to issue: ``queues`` in the order the store must try them, at most ``max_jobs`` jobs."""

    queues: tuple[str, ...]
    max_jobs: int


@dataclass(frozen=True, slots=True)
class Strict:
    """Ordered queues: the first has absolute priority over the second, and so on."""

    queues: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("a Strict policy needs at least one queue")
        if len(set(self.queues)) != len(self.queues):
            raise ValueError(f"a Strict policy lists a queue twice: {self.queues}")

    @property
    def served_queues(self) -> tuple[str, ...]:
        return self.queues

    def plan(self, available: int) -> list[PlannedClaim]:
        return [PlannedClaim(queues=self.queues, max_jobs=available)] if available > 0 else []

    def charge(self, claim: PlannedClaim) -> None:
        """Strict keeps no credit."""


@dataclass(slots=True)
class Weighted:
    """Queues share the pool in proportion to their weights (each at least 1)."""

    weights: tuple[tuple[str, int], ...]
    _credits: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError("a Weighted policy needs at least one queue")
        names = [name for name, _ in self.weights]
        if len(set(names)) != len(names):
            raise ValueError(f"a Weighted policy lists a queue twice: {names}")
        for name, weight in self.weights:
            if weight < 1:
                raise ValueError(f"queue {name!r} has weight {weight}; weights must be at least 1")
        self._credits = dict.fromkeys(names, 0)

    @property
    def served_queues(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.weights)

    def _step(self, credits: dict[str, int]) -> str:
        """One slot of smooth weighted round-robin on ``credits`` (mutated): returns the winner."""
        total = sum(weight for _, weight in self.weights)
        for name, weight in self.weights:
            credits[name] = min(credits[name] + weight, total)
        winner = max(self.served_queues, key=lambda name: credits[name])  # first wins ties
        credits[winner] -= total
        return winner

    def plan(self, available: int) -> list[PlannedClaim]:
        """Allocate ``available`` slots on a scratch copy of the credits; nothing is charged yet."""
        scratch = dict(self._credits)
        counts = dict.fromkeys(self.served_queues, 0)
        for _ in range(max(available, 0)):
            counts[self._step(scratch)] += 1
        queues = self.served_queues
        return [
            PlannedClaim(queues=(name, *(q for q in queues if q != name)), max_jobs=counts[name])
            for name in queues
            if counts[name] > 0
        ]

    def charge(self, claim: PlannedClaim) -> None:
        """Advance the persistent credit for a claim that is being issued, as its slots would."""
        for _ in range(claim.max_jobs):
            self._step(self._credits)

    @property
    def credits(self) -> dict[str, int]:
        return dict(self._credits)


Policy = Strict | Weighted
