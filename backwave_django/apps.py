import django
from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class BackwaveConfig(AppConfig):
    name = "backwave_django"
    label = "backwave_django"
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)

        autodiscover_modules("jobs")  # each installed app's jobs.py: registering is just defining
        if uses_tasks_backend() and django.VERSION >= (6, 0):
            autodiscover_modules("tasks")  # and Django's convention for @task functions, ours to run
        # What a process's first enqueue would otherwise import in the middle of a request (the stores, and
        # the OpenTelemetry API when it is installed: 40 to 75 ms here), imported with the rest of start-up.
        from . import store, telemetry  # noqa: F401

        store.store_classes()


def uses_tasks_backend() -> bool:
    """Whether ``settings.TASKS`` names backwave's backend (Django 6's Tasks framework)."""
    from django.conf import settings

    backends = getattr(settings, "TASKS", None)
    if not isinstance(backends, dict):
        return False
    return any(
        isinstance(params, dict) and params.get("BACKEND") == "backwave_django.tasks.BackwaveBackend"
        for params in backends.values()
    )
