"""The cut-off alarms: one thread, earliest first, disarmed alarms never run, a failing one is logged."""

from __future__ import annotations

import threading
import time

from backwave_django.shell import alarms as alarms_module
from backwave_django.shell.alarms import Alarms


def test_alarms_run_at_their_time_earliest_first_even_when_armed_later():
    alarms = Alarms("t", time.monotonic)
    ran: list[str] = []
    done = threading.Event()
    now = time.monotonic()
    alarms.arm(now + 0.3, lambda: (ran.append("late"), done.set()))
    alarms.arm(now + 0.1, lambda: ran.append("early"))  # wakes the sleeping thread for an earlier time
    assert done.wait(5)
    assert ran == ["early", "late"]
    assert time.monotonic() - now >= 0.3
    alarms.close()


def test_a_disarmed_alarm_never_runs_and_the_heap_is_swept(monkeypatch):
    monkeypatch.setattr(alarms_module, "SWEEP_AFTER", 2)
    alarms = Alarms("t", time.monotonic)
    ran: list[int] = []
    keys = [alarms.arm(time.monotonic() + 60, lambda n=n: ran.append(n)) for n in range(10)]
    for key in keys[:9]:
        alarms.disarm(key)
    assert len(alarms) == 1
    assert len(alarms._heap) <= 2 * 1 + 2 + 1
    alarms.arm(time.monotonic(), lambda: ran.append(99))
    deadline = time.monotonic() + 5
    while 99 not in ran and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran == [99]
    alarms.close()
    assert len(alarms) == 0


def test_an_alarm_that_raises_is_logged_and_the_next_one_still_runs(caplog):
    alarms = Alarms("t", time.monotonic)
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    now = time.monotonic()
    alarms.arm(now, boom)
    alarms.arm(now + 0.05, done.set)
    assert done.wait(5)
    alarms.close()
    assert "a cut-off alarm failed: RuntimeError: boom" in caplog.text


def test_a_closed_alarm_set_runs_nothing_more():
    alarms = Alarms("t", time.monotonic)
    ran: list[int] = []
    alarms.arm(time.monotonic() + 0.2, lambda: ran.append(1))
    alarms.close()
    alarms.arm(time.monotonic(), lambda: ran.append(2))
    time.sleep(0.3)
    assert ran == []
