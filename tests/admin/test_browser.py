"""A real browser against a live server: log in, requeue a quarantined job, pause a queue, open the Overview.

Needs Playwright (PyPI, in the ``test`` extra) and Debian's Chromium (``apt-get install -y chromium``), driven
through ``executable_path``; without either the test is skipped and says which is missing. Screenshots of each
page go to ``test-artifacts/`` at the repository root.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from backwave_django.models import Job, QueueSettings

from ..conftest import T0
from ..factories import JobFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "browser-test-password"
OTHER_SESSIONS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
END_IDLE_SESSIONS = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'"
)


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed: pip install -e '.[test]'"
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium binary on PATH: apt-get install -y chromium (Debian)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls below are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 900})
        finally:
            browser.close()
    wait_for_live_server_connections()


def wait_for_live_server_connections(timeout: float = 2.0) -> None:
    """On PostgreSQL, make sure no live-server session is left on the test database, so that it can be dropped
    at the end of the session: wait for them to close, then end any that a finished request thread left idle
    (seen on PostgreSQL: one idle session after the browser hung up and every request thread had ended)."""
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(OTHER_SESSIONS)
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.1)
        cursor.execute(END_IDLE_SESSIONS)


def shoot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"admin-{name}.png"), full_page=True)


def test_an_operator_requeues_a_quarantined_job_pauses_a_queue_and_opens_the_overview(
    page: Any, live_server: Any
) -> None:
    User.objects.create_superuser("browser", "browser@example.com", PASSWORD)
    job = JobFactory(
        wire_name="tests.noop",  # quarantined while its handler was missing; this deployment has it again
        state=Job.State.QUARANTINED,
        terminal_at=T0,
        terminal_cause="no handler is registered for 'tests.noop'",
    )
    base = live_server.url

    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("input[name=username]", "browser")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    shoot(page, "index")
    assert page.locator("a[href='/admin/backwave_django/joboverview/']").count() >= 1

    page.goto(f"{base}/admin/backwave_django/quarantinedjob/")
    shoot(page, "quarantined")
    page.check(f"input[name=_selected_action][value='{job.id}']")
    page.select_option("select[name=action]", "requeue")
    page.click("button[name=index]")
    page.wait_for_selector("text=Are you sure you want to requeue these jobs?")
    shoot(page, "requeue-confirmation")
    page.click("input[value='Yes, requeue']")
    page.wait_for_selector("text=Requeued 1 job.")
    shoot(page, "requeued")
    job.refresh_from_db()
    assert job.state == Job.State.SCHEDULED

    page.goto(f"{base}/admin/backwave_django/job/{job.id}/change/")
    assert "scheduled" in page.content()
    shoot(page, "job-detail")

    page.goto(f"{base}/admin/backwave_django/queuesettings/")
    page.click("tr[data-queue='emails'] input[value='Pause']")
    page.wait_for_selector("text=Paused queue 'emails'")
    shoot(page, "queues")
    assert QueueSettings.objects.get(queue="emails").paused

    page.goto(f"{base}/admin/backwave_django/joboverview/")
    page.wait_for_selector("svg#backwave-chart")
    shoot(page, "overview")
