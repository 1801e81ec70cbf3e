"""The reply a store command gets when the Shell did not carry it out: one table for every Shell.

When a store call raises, the Shell answers the commands of the step it did not carry out, so the Driver
never waits for a reply that will not come (a claim's reserved slots, a report in flight, a maintenance
call that is "in flight" for ever). The Pump, the test pump and the simulator all answer from here.
"""

from __future__ import annotations

from datetime import datetime

from . import commands as cmd
from . import events as ev

#: The commands that are store calls: each is answered by exactly one event.
STORE_COMMANDS = (
    cmd.ClaimBatch,
    cmd.ReportOutcomes,
    cmd.Heartbeat,
    cmd.ExpireLeases,
    cmd.LoadSchedules,
    cmd.MintSchedules,
    cmd.PurgeFinished,
)


def unissued(command: cmd.Command, now: datetime) -> ev.Event | None:
    """The failed reply to store command ``command``, not carried out; None for a command that is not a
    store call (the Shell still obeys those)."""
    match command:
        case cmd.ClaimBatch():
            return ev.ClaimCompleted(now=now, failed=True)
        case cmd.ReportOutcomes():
            return ev.OutcomesReported(now=now, failed=True)
        case cmd.Heartbeat():
            return ev.HeartbeatCompleted(now=now, failed=True)
        case cmd.ExpireLeases():
            return ev.LeasesExpired(now=now, count=0, failed=True)
        case cmd.LoadSchedules():
            return ev.SchedulesLoaded(now=now, failed=True)
        case cmd.MintSchedules():
            return ev.SchedulesMinted(now=now, failed=True)
        case cmd.PurgeFinished():
            return ev.FinishedPurged(now=now, failed=True)
    return None
