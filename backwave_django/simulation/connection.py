"""A caller's connection to the one store: the store faults of each call, and how long it takes.

Every Pump, the client and the operator reach the shared :class:`MemoryStore` through a connection of their
own, named by a stable *site*. Each call asks the fault plan four questions (so each kind keeps its address
whatever the others answer) and then, in this order of precedence:

- ``store-late``: the caller sees a transient error now, and the write commits later, with the arguments
  (and the ``now``) it was sent with: a reply lost in a network that still delivers the request;
- ``store-fatal``: a fault the store does not call transient (the Pump halts); nothing is written;
- ``store-before`` / ``store-after``: the store's own fault hook raises ``TransientFault`` before anything
  changes, or after the change committed (the reply is lost).

A partitioned node's calls all fail, transiently, after a connect timeout; so does every call during an
outage (the database is down for everyone).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..store.contract import UnknownParent
from ..store.memory import TransientFault
from .invariants import Violation
from .plan import Params, stream
from .timeline import us

if TYPE_CHECKING:
    from .cluster import Cluster

CONNECT_TIMEOUT = us(1.0)
#: The longest a late commit lands after its caller saw the error (seconds).
LATE_COMMIT_MAX = 6.0
#: How much more (or less) often a call of this operation faults than the kind's rate says: the writes that
#: end Attempts are where the fence matters, and an idle Pump's many empty claims would drown them.
#: A mint is where "at most once per tick" matters, as the report is for the fence.
WEIGHTS = {"report": 8.0, "mint": 8.0, "claim": 0.5}


class SimulatedFatalFault(RuntimeError):
    """A store fault that no retry cures: the store does not classify it as transient."""


class Connection:
    def __init__(self, sim: Cluster, site: str, *, committed: Callable[[], None] | None = None) -> None:
        self.sim = sim
        self.site = site
        self.committed = committed  # called after each write that reached the store
        self.partitioned_until = 0
        self.latency = 0  # of the last call
        self._latencies: random.Random = stream(sim.scenario.seed, f"latency/{site}")

    def call(
        self, operation: Callable[..., Any], *, reporting: Mapping[int, int] | None = None, **kwargs: Any
    ) -> Any:
        """Run ``operation(**kwargs)`` on the store as this caller; sets :attr:`latency`."""
        sim, plan = self.sim, self.sim.plan
        name = getattr(operation, "__name__", "call")
        weight = WEIGHTS.get(name, 1.0)
        self.latency = self._latency()
        late = plan.decide("store-late", self.site, _late, weight)
        fatal = plan.flag("store-fatal", self.site, weight)
        before = plan.flag("store-before", self.site, weight)
        after = plan.flag("store-after", self.site, weight)
        if sim.timeline.now < self.partitioned_until:
            self.latency = CONNECT_TIMEOUT
            raise TransientFault(f"{self.site}: the store is unreachable (partitioned)")
        if sim.timeline.now < sim.outage_until:
            self.latency = CONNECT_TIMEOUT
            raise TransientFault(f"{self.site}: the database is down")
        if late is not None:
            sim.note(self.site, f"FAULT store-late {name}: the reply is lost; it commits in {late['delay']}s")
            sim.timeline.after(us(float(late["delay"])), self._commit, operation, reporting, kwargs)
            raise TransientFault(f"{self.site}: no reply to {name} (it may still commit)")
        if fatal:
            sim.note(self.site, f"FAULT store-fatal {name}")
            raise SimulatedFatalFault(f"{self.site}: simulated non-transient failure of {name}")
        if before or after:
            sim.note(self.site, f"FAULT store-{'before' if before else 'after'} {name}")
        return self._run(operation, reporting, kwargs, before, after)

    def _latency(self) -> int:
        """A round trip: mostly milliseconds, sometimes a slow one (a lock wait, a busy server)."""
        rng = self._latencies
        return rng.randint(300, 12_000) if rng.random() < 0.9 else rng.randint(20_000, 300_000)

    def _commit(
        self, operation: Callable[..., Any], reporting: Mapping[int, int] | None, kwargs: Any
    ) -> None:
        self.sim.note(self.site, f"late commit of {getattr(operation, '__name__', 'call')}")
        try:
            self._run(operation, reporting, kwargs, False, False)
        except TransientFault:  # pragma: no cover - no fault is armed for a late commit
            raise AssertionError("a late commit faulted") from None
        except UnknownParent as exc:  # its parent was purged meanwhile: refused whole, as the contract says
            self.sim.note(self.site, f"late commit refused: {exc.missing} purged")

    def _run(
        self,
        operation: Callable[..., Any],
        reporting: Mapping[int, int] | None,
        kwargs: Any,
        before: bool,
        after: bool,
    ) -> Any:
        sim = self.sim
        sim.armed = (before, after)
        sim.checker.reporting = None if reporting is None else (str(kwargs["worker_id"]), reporting)
        try:
            return operation(**kwargs)
        except (TransientFault, Violation, UnknownParent):  # a parent purged: the client judges it
            raise
        except Exception as exc:  # the store raised something nobody injected: a bug in it
            name = getattr(operation, "__name__", "call")
            sim.checker.fail("StoreSound", f"{self.site}: {name} raised {exc!r}")
            raise
        finally:
            sim.armed = (False, False)
            sim.checker.reporting = None
            if self.committed is not None and not before:
                self.committed()


def _late(rng: random.Random) -> Params:
    return {"delay": round(rng.uniform(0.05, LATE_COMMIT_MAX), 3)}
