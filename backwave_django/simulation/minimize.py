"""Shrinking a failing run: take fault decisions away while the same invariant still trips.

This is delta debugging (ddmin) over the run's recorded fault plan. A candidate plan is replayed with the
seed; it is kept when the run still fails with the *same* invariant (another failure is another story).
Because decisions are addressed by (kind, site, ordinal), removing some leaves the others in place.
"""

from __future__ import annotations

from .plan import Address, Params
from .run import Outcome, Plant, run

#: Replays the minimizer may spend on one failure.
MAX_REPLAYS = 400


def minimize(failure: Outcome, plant: Plant | None = None, max_replays: int = MAX_REPLAYS) -> Outcome:
    """The failing run with the fewest fault decisions found (traced); ``failure`` itself if none replays."""
    assert failure.violation is not None
    target = failure.violation.name
    replays = 0

    def trips(entries: list[tuple[Address, Params]]) -> Outcome | None:
        nonlocal replays
        replays += 1
        outcome = run(failure.seed, scenario=failure.scenario, plan=dict(entries), plant=plant)
        return outcome if outcome.violation is not None and outcome.violation.name == target else None

    entries = sorted(failure.plan.items())
    best = trips(entries)
    if best is None:  # the recorded plan does not replay the failure: show the original
        return run(failure.seed, scenario=failure.scenario, plant=plant, tracing=True)
    chunks = 2
    while entries and replays < max_replays:
        size = max(1, -(-len(entries) // chunks))
        for start in range(0, len(entries), size):
            candidate = entries[:start] + entries[start + size :]
            found = trips(candidate)
            if found is not None:
                entries, best = candidate, found
                chunks = max(chunks - 1, 2)
                break
            if replays >= max_replays:
                break
        else:
            if size == 1:
                break
            chunks = min(len(entries), chunks * 2)
    return run(failure.seed, scenario=failure.scenario, plan=dict(entries), plant=plant, tracing=True)
