"""The worker pool: every task runs, slow tasks all get a thread, and closing lets queued tasks finish."""

from __future__ import annotations

import threading

from backwave_django.shell.workers import WorkerPool


def test_every_submitted_task_runs_exactly_once():
    done: list[int] = []
    lock = threading.Lock()

    def record(n: int) -> None:
        with lock:
            done.append(n)

    pool = WorkerPool(8, "test")
    for n in range(2000):
        pool.submit(record, n)
    pool.close()
    assert sorted(done) == list(range(2000))


def test_a_burst_of_slow_tasks_reaches_every_thread_of_the_pool():
    size = 16
    barrier = threading.Barrier(size, timeout=10)  # passes only if all sixteen run at the same time
    passed: list[bool] = []
    pool = WorkerPool(size, "test")
    for _ in range(size):
        pool.submit(lambda: passed.append(barrier.wait() >= 0))
    pool.close()
    assert passed == [True] * size


def test_tasks_submitted_while_every_thread_is_busy_run_when_one_frees():
    release = threading.Event()
    ran = threading.Event()
    pool = WorkerPool(2, "test")
    pool.submit(release.wait)
    pool.submit(release.wait)
    pool.submit(ran.set)
    assert not ran.wait(0.2)
    release.set()
    assert ran.wait(5)
    pool.close()
