"""The order in which a store writes a batch of new jobs: one rule for the database stores and the memory
store (``store/inserts.py`` says why)."""

from __future__ import annotations

from collections.abc import Sequence

from .contract import NewJob


def inserts_order(jobs: Sequence[NewJob]) -> list[int]:
    """Positions in ``jobs``: the plain jobs in the order given, then the keyed ones by (wire name, key)."""
    plain = [i for i, new in enumerate(jobs) if new.unique_key is None]
    keyed = [i for i, new in enumerate(jobs) if new.unique_key is not None]
    return plain + sorted(keyed, key=lambda i: (jobs[i].wire_name, jobs[i].unique_key or ""))
