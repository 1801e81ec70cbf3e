"""Demo jobs: registered at start-up by autodiscovery, run by ``manage.py backwave_demo``."""

import random
import time
from decimal import Decimal

from backwave_django import JobContext, job

from .models import Greeting, NightlyReport


@job("demo.send-welcome-email", queue="emails", max_attempts=5)
def send_welcome_email(user_id: int, context: JobContext) -> None:
    """Pretend to send an email and write a row, inside this Attempt's scope."""
    Greeting.objects.create(user_id=user_id, attempt=context.attempt)


@job("demo.flaky-report", queue="reports", max_attempts=4)
def flaky_report(report_id: int, fail_times: int, context: JobContext) -> str:
    """Fails its first ``fail_times`` attempts, then succeeds: shows retries with backoff."""
    if context.attempt <= fail_times:
        raise RuntimeError(f"report {report_id}: simulated failure on attempt {context.attempt}")
    return f"report {report_id} done"


@job("demo.always-fails", max_attempts=2)
def always_fails(reason: str) -> None:
    raise ValueError(reason)


@job("demo.sum", queue="default")
def add(amounts: list[Decimal]) -> Decimal:
    time.sleep(random.uniform(0, 0.01))
    return sum(amounts, Decimal(0))


@job("demo.nightly-report", queue="reports")
def nightly_report(context: JobContext) -> None:
    """Run by the ``nightly-report`` schedule; a make-up run after an outage knows which night it is for."""
    NightlyReport.objects.create(job_id=context.job_id, night=context.scheduled_for)
