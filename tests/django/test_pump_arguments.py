"""backwave_pump's --grace and --burst-horizon: refused before anything runs unless finite and in range."""

from __future__ import annotations

import argparse
import math

import pytest
from django.core.management import CommandError, call_command

from backwave_django.management import arguments
from backwave_django.models import Job

from .. import jobs


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        (["--grace", "inf"], "argument --grace: 'inf' is not a number from 0 to 86400"),
        (["--grace", "nan"], "argument --grace: 'nan' is not a number from 0 to 86400"),
        (["--grace", "-1"], "argument --grace: '-1' is not a number from 0 to 86400"),
        (["--grace", "86401"], "argument --grace: '86401' is not a number from 0 to 86400"),
        (["--grace", "1e400"], "argument --grace: '1e400' is not a number from 0 to 86400"),
        (["--grace", "soon"], "argument --grace: 'soon' is not a number from 0 to 86400"),
        (["--burst-horizon=-inf"], "argument --burst-horizon: '-inf' is not a number from 0 to 86400"),
        (["--burst-horizon", "1e6"], "argument --burst-horizon: '1e6' is not a number from 0 to 86400"),
    ],
)
def test_a_flag_out_of_range_is_refused_before_anything_runs(argument, message):
    with pytest.raises(CommandError, match=message):
        call_command("backwave_pump", *argument)


@pytest.mark.parametrize(
    ("option", "value"), [("grace", math.inf), ("burst_horizon", math.nan), ("grace", True)]
)
def test_a_keyword_option_out_of_range_is_refused_too(option, value):
    """call_command() passes keyword options around argparse: the command checks them itself."""
    flag = "--" + option.replace("_", "-")
    with pytest.raises(CommandError, match=f"argument {flag}: .* is not a number from 0 to 86400"):
        call_command("backwave_pump", **{option: value})


@pytest.mark.django_db(transaction=True)
def test_a_burst_run_with_no_grace_and_no_horizon_drains_and_exits(settings, capsys):
    settings.BACKWAVE = {"GROUPS": {"default": {"QUEUES": ["default"], "POLL_INTERVAL": 0.05}}}
    jobs.noop.enqueue()
    call_command("backwave_pump", "--burst", "--grace", "0", "--burst-horizon", "0", "--no-hints")
    assert Job.objects.get().state == "succeeded"
    assert "1 outcomes applied" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("group", ["default", ["default"]])
def test_call_command_takes_one_group_by_name_or_a_list_of_them(settings, capsys, group):
    settings.BACKWAVE = {"GROUPS": {"default": {"QUEUES": ["default"], "POLL_INTERVAL": 0.05}}}
    jobs.noop.enqueue()
    call_command("backwave_pump", group=group, burst=True, grace=0, burst_horizon=0, no_hints=True)
    assert Job.objects.get().state == "succeeded"
    assert "group default: stopped" in capsys.readouterr().out


def test_the_shared_types_name_the_value_and_the_range():
    within_a_minute = arguments.seconds_between(0, 60)
    assert within_a_minute("0") == 0.0
    assert within_a_minute("59.5") == 59.5
    with pytest.raises(argparse.ArgumentTypeError, match="'61' is not a number from 0 to 60"):
        within_a_minute("61")
    with pytest.raises(argparse.ArgumentTypeError, match=r"'9999.*\(5002 characters\) is not an int >= 1"):
        arguments.count("9" * 5000)
    assert (arguments.count("3"), arguments.count_or_zero("0"), arguments.seconds("0.001")) == (3, 0, 0.001)
