"""The torture run's job kinds. Each handler journals its execution in its own transaction first."""

import random
import time

from django.db import transaction

from backwave_django import JobContext, job

from .models import Execution

LIMITED_QUEUE = "torture-limited"


def journal(context: JobContext) -> None:
    with transaction.atomic():
        Execution.objects.create(job_id=context.job_id, attempt=context.attempt, worker=context.worker_id)


def finished(context: JobContext) -> None:
    """The handler is about to return: its success is in the worker's hands (for the ``charged`` audit)."""
    Execution.objects.filter(job_id=context.job_id, attempt=context.attempt).update(finished=True)


@job("torture.fast", queue="torture", max_attempts=30)
def fast(context: JobContext) -> None:
    journal(context)
    finished(context)


@job("torture.slow", queue="torture", max_attempts=30)
def slow(seconds: float, context: JobContext) -> None:
    journal(context)
    context.wait_cancelled(seconds)
    context.raise_if_cancelled()
    finished(context)


@job("torture.flaky", queue="torture", max_attempts=30)
def flaky(fail_times: int, context: JobContext) -> None:
    """Fails its first ``fail_times`` Attempts that get this far, then succeeds."""
    journal(context)
    failures = Execution.objects.filter(job_id=context.job_id).count() - 1
    if failures < fail_times:
        raise RuntimeError(f"planned failure {failures + 1} of {fail_times}")
    finished(context)


@job("torture.doomed", queue="torture", max_attempts=3)
def doomed(context: JobContext) -> None:
    journal(context)
    raise ValueError("this job always fails")


@job("torture.limited", queue=LIMITED_QUEUE, max_attempts=30)
def limited(context: JobContext) -> None:
    journal(context)
    time.sleep(random.uniform(0.01, 0.05))
    finished(context)


# -- the hostile mode's jobs --------------------------------------------------------------------------------


@job("torture.hostile-text", queue="torture", max_attempts=2)
def hostile_text(sku: str, context: JobContext) -> None:
    """Fails with text no database stores as is: NUL characters, a lone surrogate, 50,000 characters."""
    journal(context)
    raise ValueError(f"unknown sku {sku}\x00 \udcff {'y' * 50_000}")


@job("torture.hung", queue="torture", max_attempts=2)
def hung(seconds: float, context: JobContext) -> None:
    """Ignores its timeout and every request to stop; enqueued with a timeout shorter than its sleep."""
    journal(context)
    time.sleep(seconds)
