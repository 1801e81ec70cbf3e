import os

from django.apps import AppConfig


class TestsConfig(AppConfig):
    """Lets a worker subprocess load the suite's jobs (EXTRA_APPS=tests): its jobs.py is autodiscovered. With
    BACKWAVE_TEST_SPANS_FILE set, it also exports the subprocess's spans to that file."""

    name = "tests"
    label = "backwave_tests"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if os.environ.get("BACKWAVE_TEST_SPANS_FILE"):  # opentelemetry is imported only then
            from .telemetry.exporter import install_from_environment

            install_from_environment()
