"""PostgreSQL only: the notification channel is BACKWAVE['HINT_CHANNEL'], so two projects that share a server
never wake each other; and the hint listener's start-up probe."""

from __future__ import annotations

import logging
import time

import pytest

from backwave_django.shell.listener import HintListener
from backwave_django.shell.node import Node

from .. import jobs
from .helpers import group, running, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("postgres")]


def listening(channel: str) -> HintListener:
    listener = HintListener(channel=channel, reconnect_delay=0.1)
    listener.start()
    assert listener.connected.wait(10), f"the listener on {channel!r} did not connect"
    return listener


def test_two_projects_on_one_server_with_their_own_channels_never_wake_each_other(settings):
    shop, blog = listening("shop_jobs"), listening("blog_jobs")
    try:
        for channel, count in (("shop_jobs", 3), ("blog_jobs", 2)):
            settings.BACKWAVE = {"HINT_CHANNEL": channel}
            for _ in range(count):
                jobs.noop.enqueue()
            jobs.noop.enqueue_many([{}] * 5)  # the batch statement notifies too: once per queue
        wait_until(lambda: shop.received == 4 and blog.received == 3, timeout=5)
        time.sleep(0.3)  # nothing else arrives late
        assert (shop.received, blog.received) == (4, 3)
    finally:
        shop.stop()
        blog.stop()


def test_a_pump_is_woken_by_its_own_channel_and_only_polls_for_the_other(settings):
    """A Pump polling every 10 s with hints on: a job enqueued with its channel starts at once; with another
    project's channel it waits for the poll."""
    with running(settings, {"g": group(POLL_INTERVAL=10)}, more={"HINT_CHANNEL": "ours"}) as node:
        assert node.listener is not None and node.listener.channel == "ours"
        assert node.listener.connected.wait(10)
        time.sleep(0.3)  # past the first poll
        started = time.monotonic()
        job = jobs.noop.enqueue()
        wait_until(lambda: type(job).objects.get(id=job.id).state == "succeeded", timeout=5)
        assert time.monotonic() - started < 2
        settings.BACKWAVE = {**settings.BACKWAVE, "HINT_CHANNEL": "theirs"}
        received = node.listener.received
        from django.db import connection

        with connection.cursor() as cursor:  # another process's enqueue: only the NOTIFY reaches us
            cursor.execute("SELECT pg_notify('theirs', 'default')")
        time.sleep(0.5)
        assert node.listener.received == received


def test_the_listener_proves_its_connection_hears_notifications_before_it_listens():
    listener = listening("backwave")
    try:
        assert not listener.unusable.is_set()
    finally:
        listener.stop()


def test_the_node_logs_once_how_its_pumps_learn_of_new_jobs(settings, caplog):
    settings.BACKWAVE = {"GROUPS": {"g": group(POLL_INTERVAL=0.5)}, "HINT_CHANNEL": "logged"}
    with caplog.at_level(logging.INFO, logger="backwave.node"):
        node = Node(["g"], reconnect_delay=0.1)
        node.start()
        node.stop(1)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("wake-up hints")]
    assert len(lines) == 1
    assert "LISTEN logged on database alias 'default'" in lines[0]
    assert "poll every 0.5 s" in lines[0]
