"""Races on PostgreSQL and MariaDB with real separate connections: one thread, one connection (Django's are
per thread).

Database stores only (``db_store``: PostgresStore or MySQLStore, and the portable store on the same database):
the memory store serializes every operation under one lock, so there is no race to lose, and SQLite
serializes writers.
Every thread closes its connection when it ends, so the test database can be flushed afterwards. The clock is
still an input: all threads pass the same virtual ``now``, so only the interleaving is left to chance.
Assertions read through the contract, and count leases through the inspection helper.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from backwave_django.core.records import ClaimedJob, OutcomeKind, OutcomeReport
from backwave_django.core.states import State
from backwave_django.store.contract import JobStore
from backwave_django.store.mysql import MySQLStore
from backwave_django.store.postgres import PostgresStore

from ..conftest import LEASE, T0
from .support import MAX_PAYLOAD, RETRY, inspect, new_job

pytestmark = [pytest.mark.django_db(transaction=True)]

LONG_LEASE = timedelta(hours=1)  # no lease lapses by accident while the threads run
TIMEOUT = 60.0  # seconds; a hung thread fails the test instead of hanging the suite


def run_threads(targets: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run each target in its own thread (and connection); return their results, re-raising any failure."""
    results: dict[str, Any] = {}
    errors: list[BaseException] = []

    def run(name: str, target: Callable[[], Any]) -> None:
        try:
            results[name] = target()
        except BaseException as exc:  # surfaced in the test's own thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n, t), name=n) for n, t in targets.items()]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not [t.name for t in threads if t.is_alive()], "threads still running after the timeout"
    if errors:
        raise errors[0]
    return results


def bulk_enqueue(store: JobStore, count: int, *, queue: str = "default") -> list[int]:
    jobs = store.enqueue([new_job(queue=queue) for _ in range(count)], now=T0, max_payload_bytes=MAX_PAYLOAD)
    return [j.id for j in jobs]


def successes(batch: list[ClaimedJob]) -> list[OutcomeReport]:
    return [
        OutcomeReport(job_id=c.id, attempt=c.attempt, kind=OutcomeKind.SUCCEEDED, max_attempts=c.max_attempts)
        for c in batch
    ]


def finish(store: JobStore, worker: str, batch: list[ClaimedJob]) -> frozenset[int]:
    result = store.report(worker_id=worker, reports=successes(batch), retry=RETRY, now=T0)
    return result.applied


def states(store: JobStore, ids: list[int]) -> Counter[tuple[State, int]]:
    """How many of the jobs are in each (state, attempt)."""
    return Counter((view.state, view.attempt) for view in map(store.get_job, ids) if view is not None)


def outcome_counts(store: JobStore, ids: list[int]) -> Counter[int]:
    """How many Outcomes each job has."""
    return Counter({i: len(store.list_outcomes(i)) for i in ids})


def test_concurrent_claimers_drain_thousands_of_jobs_each_exactly_once(db_store, row_locks):
    ids = bulk_enqueue(db_store, 4000)

    def drain(worker: str) -> list[int]:
        mine: list[int] = []
        while batch := db_store.claim(
            worker_id=worker, queues=["default"], max_jobs=8, lease_duration=LONG_LEASE, now=T0
        ):
            assert finish(db_store, worker, batch) == {c.id for c in batch}
            mine += [c.id for c in batch]
        return mine

    results = run_threads(
        {f"host:{n}:g:claimer": (lambda n=n: drain(f"host:{n}:g:claimer")) for n in range(5)}
    )

    claimed = [job_id for mine in results.values() for job_id in mine]
    assert len(claimed) == len(set(claimed)), "a job was claimed twice"
    assert sorted(claimed) == ids, "a job was missed"
    assert sum(1 for mine in results.values() if mine) >= 2, (
        "only one claimer ever got work: no race happened"
    )
    assert states(db_store, ids) == {(State.SUCCEEDED, 1): len(ids)}
    assert set(outcome_counts(db_store, ids).values()) == {1}
    assert inspect(db_store).leased_in("default") == 0


def test_a_concurrency_limit_is_never_exceeded_while_claimers_race(db_store, row_locks):
    limit, queue = 3, "limited"
    ids = bulk_enqueue(db_store, 240, queue=queue)
    ids += bulk_enqueue(db_store, 60, queue="free")  # claimers also fall through to an unlimited queue
    db_store.set_concurrency_limit(queue, limit, actor="ops", now=T0)
    samples: list[int] = []
    lock = threading.Lock()
    done: set[int] = set()

    def claim_and_finish(worker: str) -> int:
        rng, finished = random.Random(worker), 0
        while True:
            batch = db_store.claim(
                worker_id=worker, queues=[queue, "free"], max_jobs=2, lease_duration=LONG_LEASE, now=T0
            )
            if not batch:
                with lock:
                    if len(done) == len(ids):
                        return finished
                time.sleep(0.001)
                continue
            ours = [c for c in batch if c.queue == queue]
            assert len(ours) <= limit
            # the claimer's own view right after its claim: it holds what it got, and the cap holds
            for c in batch:
                lease = db_store.get_lease(c.id)
                assert lease is not None and (lease.owner, lease.attempt) == (worker, c.attempt)
            assert inspect(db_store).leased_in(queue) <= limit
            time.sleep(rng.uniform(0, 0.003))  # the handler runs while the slot is held
            assert finish(db_store, worker, batch) == {c.id for c in batch}
            with lock:
                done.update(c.id for c in batch)
            finished += len(ours)

    claimers, ended, all_ended = 6, set[str](), threading.Event()

    def claimer(worker: str) -> Callable[[], int]:
        def run() -> int:
            try:
                return claim_and_finish(worker)
            finally:
                with lock:
                    ended.add(worker)
                    if len(ended) == claimers:
                        all_ended.set()

        return run

    def sample_until_claimers_end() -> None:
        while not all_ended.is_set():
            samples.append(inspect(db_store).leased_in(queue))

    results = run_threads(
        {"sampler": sample_until_claimers_end, **{f"c{n}": claimer(f"host:{n}:g:c") for n in range(claimers)}}
    )
    results.pop("sampler")

    assert sum(results.values()) == 240
    assert len(samples) > 50, "the sampler barely ran"
    assert max(samples) <= limit
    assert max(samples) == limit, "the race never reached the limit"
    assert states(db_store, ids) == {(State.SUCCEEDED, 1): 300}


def test_concurrent_expiry_sweepers_dispose_each_lapsed_lease_exactly_once(db_store, row_locks):
    ids = bulk_enqueue(db_store, 2000)
    claimed = db_store.claim(
        worker_id="host:0:g:dead", queues=["default"], max_jobs=2000, lease_duration=LEASE, now=T0
    )
    assert len(claimed) == 2000
    lapsed = T0 + LEASE

    def sweep() -> int:
        disposed = 0
        while count := db_store.expire_leases(queues=["default"], max_jobs=25, retry=RETRY, now=lapsed):
            disposed += count
        return disposed

    counts = run_threads({f"sweeper-{n}": sweep for n in range(4)})

    assert sum(counts.values()) == len(ids)
    assert sum(1 for c in counts.values() if c) >= 2, "only one sweeper ever found work: no race happened"
    assert db_store.expire_leases(queues=["default"], max_jobs=100, retry=RETRY, now=lapsed) == 0
    for job_id in ids:
        [row] = db_store.list_outcomes(job_id)
        assert (row.kind, row.attempt) == (OutcomeKind.EXPIRED, 1)
        assert db_store.get_job(job_id).due_at == lapsed + RETRY.backoff(1)
    assert states(db_store, ids) == {(State.SCHEDULED, 1): 2000}
    assert inspect(db_store).leased_in("default") == 0


def test_racing_reports_and_sweeps_end_each_attempt_exactly_once(db_store, row_locks):
    """A reporter whose clock says its leases are live races sweepers whose clock says they lapsed."""
    ids = bulk_enqueue(db_store, 1200)
    worker = "host:0:g:slow"
    claimed = db_store.claim(
        worker_id=worker, queues=["default"], max_jobs=1200, lease_duration=LEASE, now=T0
    )
    random.Random(7).shuffle(claimed)
    applied: list[int] = []

    def report_all() -> None:
        for start in range(0, len(claimed), 10):
            batch = claimed[start : start + 10]
            result = db_store.report(
                worker_id=worker, reports=successes(batch), retry=RETRY, now=T0 + timedelta(seconds=30)
            )
            applied.extend(result.applied)

    def sweep() -> int:
        disposed = 0
        while count := db_store.expire_leases(queues=["default"], max_jobs=10, retry=RETRY, now=T0 + LEASE):
            disposed += count
        return disposed

    results = run_threads({"reporter": report_all, **{f"sweeper-{n}": sweep for n in range(3)}})

    swept = sum(v for k, v in results.items() if k.startswith("sweeper"))
    assert len(applied) + swept == len(ids)
    assert set(outcome_counts(db_store, ids).values()) == {1}
    assert states(db_store, ids) == +Counter(
        {(State.SUCCEEDED, 1): len(applied), (State.SCHEDULED, 1): swept}
    )
    assert inspect(db_store).leased_in("default") == 0


def test_no_claim_started_after_a_first_ever_pause_returns_gets_work(db_store, row_locks):
    queue = "hot"
    bulk_enqueue(db_store, 3000, queue=queue)
    pause_returned, finished = threading.Event(), threading.Event()
    claims_started = Counter[str]()
    lock = threading.Lock()
    violations: list[tuple[str, list[int]]] = []

    def claim_until_told(worker: str) -> None:
        while not finished.is_set():
            after_pause = pause_returned.is_set()
            batch = db_store.claim(
                worker_id=worker, queues=[queue], max_jobs=1, lease_duration=LONG_LEASE, now=T0
            )
            with lock:
                claims_started["after" if after_pause else "before"] += 1
            if after_pause and batch:
                violations.append((worker, [c.id for c in batch]))

    def pause_mid_race() -> int:
        deadline = time.monotonic() + 10
        while claims_started["before"] < 40 and time.monotonic() < deadline:
            time.sleep(0.002)
        db_store.pause_queue(queue, actor="ops", now=T0)
        pause_returned.set()
        leased_when_paused = inspect(db_store).leased_in(queue)
        time.sleep(0.5)  # let the claimers keep trying against the paused queue
        finished.set()
        return leased_when_paused

    results = run_threads(
        {
            "pauser": pause_mid_race,
            **{f"c{n}": (lambda n=n: claim_until_told(f"host:{n}:g:c")) for n in range(4)},
        }
    )

    assert violations == []
    assert claims_started["before"] >= 40 and claims_started["after"] >= 20
    assert 0 < results["pauser"] < 3000
    if isinstance(db_store, PostgresStore | MySQLStore):
        # Their lock on the queue (an advisory lock, MariaDB's named locks) also makes the pause wait for the
        # claims in flight: they finished before it returned, and none committed afterwards. The portable
        # store has no lock to take on a queue with no settings row yet, so a claim that read the settings
        # before the pause may still commit just after it returns (it is ordered before the pause); one that
        # starts later gets nothing.
        assert inspect(db_store).leased_in(queue) == results["pauser"]


def test_concurrent_enqueues_of_one_unique_key_leave_exactly_one_job(db_store, row_locks):
    """Eight threads, each on its own connection and in its own transaction, enqueue the same keys at once
    (each a batch with a key of its own and the shared ones): one job per key is written, every thread gets
    its id back, and the others are marked duplicates."""
    shared = [f"invoice-{n}" for n in range(20)]
    start = threading.Barrier(8)

    def enqueue_keys(n: int) -> list[tuple[str, int, bool]]:
        keys = [*shared, f"own-{n}"]
        random.Random(n).shuffle(keys)
        start.wait()
        from django.db import transaction

        with transaction.atomic():
            done = db_store.enqueue(
                [new_job(unique_key=key) for key in keys], now=T0, max_payload_bytes=MAX_PAYLOAD
            )
        return [(key, d.id, d.duplicate) for key, d in zip(keys, done, strict=True)]

    results = run_threads({f"t{n}": (lambda n=n: enqueue_keys(n)) for n in range(8)})

    by_key: dict[str, set[int]] = {}
    written: Counter[str] = Counter()
    for rows in results.values():
        for key, job_id, duplicate in rows:
            by_key.setdefault(key, set()).add(job_id)
            written[key] += not duplicate
    assert all(len(ids) == 1 for ids in by_key.values()), "threads were given different jobs for one key"
    assert set(written.values()) == {1}, "a key was written twice, or never"
    assert len(by_key) == 28
    for key, (job_id,) in by_key.items():
        view = db_store.get_job(job_id)
        assert view is not None and view.unique_key == key and view.state is State.SCHEDULED


@pytest.mark.parametrize("action", ["requeue", "run now"])
def test_a_run_made_live_in_an_open_transaction_holds_a_no_overlap_mint_back_then_its_tick_is_skipped(
    db_store, row_locks, action
):
    """A NO_OVERLAP schedule's mint, planned while no run was live, meets an operator who makes a run live (a
    requeue of the last run, or a run now) in a transaction not yet committed: the mint waits for the
    schedule's lock, then sees the live run and skips its tick. Without the lock it would mint beside it."""
    from django.db import transaction

    from .test_schedules import HOUR, definition, planned, scheduled_jobs

    db_store.sync_schedules([definition(no_overlap=True, max_attempts=1)], now=T0)
    db_store.mint([planned(db_store, T0 + HOUR)], now=T0 + HOUR)
    [first] = db_store.claim(
        worker_id="w:1:g:c", queues=["default"], max_jobs=1, lease_duration=LEASE, now=T0 + HOUR
    )
    failed = OutcomeReport(job_id=first.id, attempt=1, kind=OutcomeKind.FAILED, max_attempts=1)
    db_store.report(worker_id="w:1:g:c", reports=[failed], retry=RETRY, now=T0 + HOUR)  # dead: not live
    decision = planned(db_store, T0 + 2 * HOUR)
    made_live = threading.Event()

    def operator() -> None:
        with transaction.atomic():
            if action == "requeue":
                db_store.requeue(first.id, actor="ops", now=T0 + 2 * HOUR)
            else:
                db_store.trigger_schedule("hourly", actor="ops", now=T0 + 2 * HOUR - timedelta(seconds=1))
            made_live.set()
            time.sleep(0.5)  # the mint runs meanwhile (it waits for this commit, or would mint beside it)

    def minter() -> int:
        assert made_live.wait(TIMEOUT)
        return db_store.mint([decision], now=T0 + 2 * HOUR)

    results = run_threads({"operator": operator, "minter": minter})

    assert results["minter"] == 0, "a tick was minted beside a live run"
    view = scheduled_jobs(db_store)
    assert (view.cursor, view.skipped_count, view.recent_skips) == (T0 + 2 * HOUR, 1, (T0 + 2 * HOUR,))
    runnable = db_store.claim(
        worker_id="w:1:g:c", queues=["default"], max_jobs=10, lease_duration=LEASE, now=T0 + 3 * HOUR
    )
    assert len(runnable) == 1, "two runs of a NO_OVERLAP schedule are live"


def test_children_enqueued_while_their_parents_finish_each_resolve_exactly_once(db_store, row_locks):
    """Enqueuers write children (and grandchildren) of random parents while drainers finish those parents,
    some by a failure at the ceiling: no deadlock, and every edge and every child ends as if it had been
    written alone (``core.dependencies`` on the parents' final states)."""
    from dataclasses import replace

    from backwave_django.core import dependencies
    from backwave_django.core.dependencies import RunOn

    parents = db_store.enqueue(
        [new_job(max_attempts=1) for _ in range(240)], now=T0, max_payload_bytes=MAX_PAYLOAD
    )
    parent_ids = [p.id for p in parents]
    written: list[int] = []
    lock = threading.Lock()

    def drain(worker: str) -> int:
        rng, done = random.Random(worker), 0
        while batch := db_store.claim(
            worker_id=worker, queues=["default"], max_jobs=6, lease_duration=LONG_LEASE, now=T0
        ):
            kinds = [rng.choice([OutcomeKind.SUCCEEDED] * 3 + [OutcomeKind.FAILED]) for _ in batch]
            reports = [
                OutcomeReport(
                    job_id=c.id, attempt=c.attempt, kind=k, max_attempts=c.max_attempts, message="m"
                )
                for c, k in zip(batch, kinds, strict=True)
            ]
            db_store.report(worker_id=worker, reports=reports, retry=RETRY, now=T0)
            done += len(batch)
            time.sleep(rng.random() * 0.002)
        return done

    def enqueue_children(name: str) -> int:
        rng = random.Random(name)
        for _ in range(60):
            with lock:
                pool = parent_ids + written
            picked = tuple(rng.sample(pool, rng.randint(1, 4)))
            rule = rng.choice(list(RunOn))
            # one or two jobs a call, so that batches lock several parents at once
            news = [
                replace(new_job(queue="children"), parents=picked, run_on=rule)
                for _ in range(rng.randint(1, 2))
            ]
            done = db_store.enqueue(news, now=T0, max_payload_bytes=MAX_PAYLOAD)
            with lock:
                written.extend(d.id for d in done)
        return 0

    run_threads(
        {
            **{f"host:{n}:g:drain": (lambda n=n: drain(f"host:{n}:g:drain")) for n in range(3)},
            **{f"enqueue-{n}": (lambda n=n: enqueue_children(f"enqueue-{n}")) for n in range(3)},
        }
    )
    # A claim skips the parents an enqueuer holds locked, so every drainer may have stopped at an empty
    # claim with a parent left: finish those now that nothing else runs.
    drain("host:9:g:drain")

    assert sum(1 for p in parent_ids if db_store.get_job(p).state.is_terminal) == len(parents)
    for child_id in sorted(written):
        child = db_store.get_job(child_id)
        edges = [e for e in db_store.list_edges(child_id) if e.child_id == child_id]
        finals = {e.parent_id: e.parent_state for e in edges}
        expected = dependencies.start(finals, child.run_on)
        assert child.state is expected.state, (child_id, finals, child)
        assert child.parents_remaining == sum(1 for s in finals.values() if not s.is_terminal)
        for edge in edges:
            assert (edge.resolved_at is not None) == edge.parent_state.is_terminal, edge
