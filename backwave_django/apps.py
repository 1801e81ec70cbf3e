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
