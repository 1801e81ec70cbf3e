"""The Job Manifest command: writes the file, and --check fails listing differences."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from backwave_django import job
from backwave_django.registry import registry


def test_the_manifest_lists_every_wire_name_with_queue_and_handler(tmp_path):
    path = tmp_path / "manifest.txt"
    call_command("backwave_manifest", path=str(path))
    lines = path.read_text().splitlines()
    assert "tests.add  default  tests.jobs.add" in lines
    assert "tests.sleep  slow  tests.jobs.sleep" in lines
    call_command("backwave_manifest", path=str(path), check=True)


def test_check_fails_and_lists_an_added_and_a_removed_wire_name(tmp_path):
    path = tmp_path / "manifest.txt"
    call_command("backwave_manifest", path=str(path))
    path.write_text(path.read_text() + "tests.retired  default  tests.jobs.retired\n")

    @job("tests.brand-new")
    def brand_new() -> None: ...

    try:
        with pytest.raises(CommandError) as raised:
            call_command("backwave_manifest", path=str(path), check=True)
    finally:
        registry.unregister("tests.brand-new")
    message = str(raised.value)
    assert "- tests.retired" in message and "+ tests.brand-new" in message


def test_check_reports_a_job_that_moved_queue(tmp_path):
    path = tmp_path / "manifest.txt"
    call_command("backwave_manifest", path=str(path))
    path.write_text(path.read_text().replace("tests.add  default", "tests.add  critical"))
    with pytest.raises(CommandError, match=r"~ tests\.add"):
        call_command("backwave_manifest", path=str(path), check=True)


def test_check_fails_when_the_file_is_missing(tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("backwave_manifest", path=str(tmp_path / "absent.txt"), check=True)


def test_the_committed_test_project_manifest_is_up_to_date():
    from pathlib import Path

    from demo import jobs  # noqa: F401  (the demo app's jobs, as the project registers them)

    path = Path(__file__).resolve().parents[2] / "testproject" / "backwave_manifest.txt"
    import django

    from backwave_django import manifest

    def demo(line: str) -> bool:  # the demo's tasks exist only where Django has a Tasks framework
        return line.startswith("demo.") and (django.VERSION >= (6, 0) or not line.startswith("demo.tasks."))

    if django.VERSION >= (6, 0):
        from demo import tasks  # noqa: F401

    demo_only = [line for line in manifest.render(registry).splitlines() if demo(line)]
    on_file = [line for line in path.read_text().splitlines() if demo(line)]
    assert demo_only == on_file
