import os
import random

from django.apps import AppConfig


class TortureConfig(AppConfig):
    """The torture run's jobs and journal (see docs/howto/torture.md)."""

    name = "torture"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        rate = float(os.environ.get("BACKWAVE_TORTURE_REPORT_FAULTS", "0") or 0)
        if rate > 0:
            inject_report_faults(rate)


def inject_report_faults(rate: float) -> None:
    """The hostile mode's worker processes: a share ``rate`` of outcome writes meets a transient fault, half
    of them before the write commits and half after (the write happened, but the reply was lost)."""
    from django.db import OperationalError

    from backwave_django.store.django import DjangoStore

    original = DjangoStore.report
    rng = random.Random()

    def report(self: DjangoStore, **kwargs: object) -> object:
        roll = rng.random()
        if roll < rate / 2:
            raise OperationalError("injected: server closed the connection unexpectedly (before the write)")
        result = original(self, **kwargs)  # type: ignore[arg-type]
        if roll < rate:
            raise OperationalError("injected: server closed the connection unexpectedly (after the write)")
        return result

    DjangoStore.report = report  # type: ignore[method-assign]
