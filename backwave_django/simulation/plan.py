"""The fault plan: every fault decision of a run, addressed stably so that one can be taken away alone.

A decision is asked for at a *site* (a node, a Pump's store connection, a job's executions, the hint bus)
by *kind* (``crash``, ``store-after``, ``handler-hang``, ...). Its address is ``(kind, site, ordinal)``:
the ordinal counts the questions of that kind asked at that site, so an address never depends on what other
sites or kinds drew. Drawing a run from a seed, each (kind, site) has its own ``random.Random`` stream, and
every fault injected is recorded under its address with its parameters. Replaying a recorded plan looks each
address up instead: a miss means no fault. The minimizer removes entries from a plan and replays it; the
other decisions keep their addresses, so they stay where they were.
"""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

#: A fault's parameters: plain values, so that a plan can be written to JSON and read back.
Params = dict[str, float | int | str]
Address = tuple[str, str, int]
Draw = Callable[[random.Random], Params]


def stream(seed: int, name: str) -> random.Random:
    """The random stream ``name`` of run ``seed``: the same on every machine and in every process (the name
    is hashed with CRC-32, never with Python's per-process string hash)."""
    return random.Random(seed * (1 << 32) + zlib.crc32(name.encode()))


class FaultPlan:
    """Decides whether a fault happens at each point a run asks, and remembers the ones that did."""

    def __init__(
        self, seed: int, rates: Mapping[str, float], recorded: Mapping[Address, Params] | None = None
    ) -> None:
        self.seed = seed
        self.rates = dict(rates)
        self.replaying = recorded is not None
        self.decisions: dict[Address, Params] = dict(recorded or {})
        # The kinds that can be injected at all: a question of any other kind is answered at once. (It need
        # not be counted: no address of its kind is, or will be, in the plan.)
        injectable = {kind for kind, rate in rates.items() if rate > 0}
        self.kinds = {address[0] for address in self.decisions} if self.replaying else injectable
        self.active = True  # False once the workload phase is over: faults heal so the drain converges
        self.injected: Counter[str] = Counter()
        self._streams: dict[tuple[str, str], random.Random] = {}
        self._ordinals: dict[tuple[str, str], int] = {}

    def decide(self, kind: str, site: str, draw: Draw, weight: float = 1.0) -> Params | None:
        """The parameters of the fault of ``kind`` at ``site`` this time, or None for no fault. ``weight``
        scales the kind's rate for this question (some calls matter more than others)."""
        if not self.active or kind not in self.kinds:
            return None
        key = (kind, site)
        ordinal = self._ordinals.get(key, 0)
        self._ordinals[key] = ordinal + 1
        if self.replaying:
            params = self.decisions.get((kind, site, ordinal))
        else:
            params = self._draw(kind, site, ordinal, draw, weight)
        if params is not None:
            self.injected[kind] += 1
        return params

    def _draw(self, kind: str, site: str, ordinal: int, draw: Draw, weight: float) -> Params | None:
        rate = self.rates.get(kind, 0.0) * weight
        if rate <= 0.0:
            return None
        rng = self._streams.get((kind, site))
        if rng is None:
            rng = self._streams[kind, site] = stream(self.seed, f"fault/{kind}/{site}")
        if rng.random() >= rate:
            return None
        params = draw(rng)
        self.decisions[kind, site, ordinal] = params
        return params

    def flag(self, kind: str, site: str, weight: float = 1.0) -> bool:
        """A fault without parameters: did it happen this time?"""
        return self.decide(kind, site, _no_params, weight) is not None


def _no_params(rng: random.Random) -> Params:
    return {}


def to_json(decisions: Mapping[Address, Params]) -> list[list[object]]:
    """A plan as JSON-friendly rows ``[kind, site, ordinal, params]``, sorted."""
    return [
        [kind, site, ordinal, dict(params)] for (kind, site, ordinal), params in sorted(decisions.items())
    ]


def from_json(rows: Iterable[list[object]]) -> dict[Address, Params]:
    plan: dict[Address, Params] = {}
    for kind, site, ordinal, params in rows:
        if not (isinstance(kind, str) and isinstance(site, str) and isinstance(ordinal, int)):
            raise ValueError(f"not a fault plan row: {[kind, site, ordinal, params]!r}")
        if not isinstance(params, dict):
            raise ValueError(f"fault parameters must be an object: {params!r}")
        plan[kind, site, ordinal] = dict(params)
    return plan
