"""The worker pool: every task runs, slow tasks all get a thread, and closing lets queued tasks finish."""

from __future__ import annotations

import threading

import pytest

from backwave_django.shell.workers import WorkerPool

pytestmark = pytest.mark.slow  # real threads


def test_every_submitted_task_runs_exactly_once():
    done: list[int] = []
    lock = threading.Lock()

    def record(n: int) -> bool:
        with lock:
            done.append(n)
        return False

    pool = WorkerPool(8, "test")
    for n in range(2000):
        pool.submit(lambda n=n: record(n))
    pool.close()
    assert sorted(done) == list(range(2000))


def test_a_burst_of_slow_tasks_reaches_every_thread_of_the_pool():
    size = 16
    barrier = threading.Barrier(size, timeout=10)  # passes only if all sixteen run at the same time
    passed: list[bool] = []
    pool = WorkerPool(size, "test")
    for _ in range(size):
        pool.submit(lambda: passed.append(barrier.wait() >= 0) or False)
    pool.close()
    assert passed == [True] * size


def test_tasks_submitted_while_every_thread_is_busy_run_when_one_frees():
    release = threading.Event()
    ran = threading.Event()
    pool = WorkerPool(2, "test")
    pool.submit(lambda: not release.wait())
    pool.submit(lambda: not release.wait())
    pool.submit(lambda: ran.set() or False)
    assert not ran.wait(0.2)
    release.set()
    assert ran.wait(5)
    pool.close()


def test_an_abandoned_task_gets_a_replacement_thread_and_its_own_retires_when_it_ends():
    stuck, unstick = threading.Event(), threading.Event()
    changes: list[tuple[int, int]] = []
    pool = WorkerPool(1, "test", on_change=lambda *counts: changes.append(counts))

    def hang() -> bool:
        stuck.set()
        unstick.wait(10)
        return True  # its Attempt was abandoned meanwhile

    pool.submit(hang)
    assert stuck.wait(5)
    assert pool.abandoned() == (1, 0)  # a replacement started: the pool keeps its size
    ran = threading.Event()
    pool.submit(lambda: ran.set() or False)
    assert ran.wait(5)  # the replacement runs new work while the stuck thread hangs
    unstick.set()
    pool.close()
    assert changes == [(1, 0), (0, 0)]


def test_replacements_stop_at_the_cap_and_the_slots_are_reported_lost():
    unstick = threading.Event()
    pool = WorkerPool(2, "test", max_replacements=1)
    for _ in range(2):
        pool.submit(lambda: unstick.wait(10))
    assert pool.abandoned() == (1, 0)
    assert pool.abandoned() == (2, 1)
    unstick.set()
    pool.close()
    assert pool.counts() == (0, 0)
