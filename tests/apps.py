from django.apps import AppConfig


class TestsConfig(AppConfig):
    """Lets a worker subprocess load the suite's jobs (EXTRA_APPS=tests): its jobs.py is autodiscovered."""

    name = "tests"
    label = "backwave_tests"
    default_auto_field = "django.db.models.BigAutoField"
