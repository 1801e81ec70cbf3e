"""A store command the Shell did not carry out gets one failed reply of its own kind; other commands none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.core import commands as cmd
from backwave_django.core import events as ev
from backwave_django.core.health import Health
from backwave_django.core.replies import STORE_COMMANDS, unissued
from backwave_django.core.retention import PurgeRule
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.states import State

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)
RULE = PurgeRule(queues=("default",), states=(State.SUCCEEDED,), before=NOW)

STORE_CALLS = [
    (cmd.ClaimBatch(queues=("default",), max_jobs=1, lease_duration=LEASE), ev.ClaimCompleted),
    (cmd.ReportOutcomes(reports=(), retry=RetryPolicy()), ev.OutcomesReported),
    (cmd.Heartbeat(job_ids=(1,), lease_duration=LEASE), ev.HeartbeatCompleted),
    (cmd.ExpireLeases(queues=("default",), max_jobs=1, retry=RetryPolicy()), ev.LeasesExpired),
    (cmd.LoadSchedules(queues=("default",)), ev.SchedulesLoaded),
    (cmd.MintSchedules(decisions=()), ev.SchedulesMinted),
    (cmd.PurgeFinished(rules=(RULE,), max_jobs=10), ev.FinishedPurged),
]


@pytest.mark.parametrize(("command", "reply"), STORE_CALLS, ids=lambda value: type(value).__name__)
def test_a_store_command_not_carried_out_gets_a_failed_reply_of_its_kind(command, reply):
    answer = unissued(command, NOW)
    assert type(answer) is reply
    assert answer.failed and answer.now == NOW


def test_every_store_command_has_its_failed_reply():
    assert sorted(type(command).__name__ for command, _ in STORE_CALLS) == sorted(
        kind.__name__ for kind in STORE_COMMANDS
    )


@pytest.mark.parametrize(
    "command",
    [cmd.RequestPoll(), cmd.Stop(), cmd.RecordStatus(health=Health.RUNNING, detail="")],
    ids=lambda value: type(value).__name__,
)
def test_a_command_that_is_no_store_call_gets_no_reply(command):
    assert unissued(command, NOW) is None
