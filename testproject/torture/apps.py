from django.apps import AppConfig


class TortureConfig(AppConfig):
    """The torture run's jobs and journal (see docs/howto/torture.md)."""

    name = "torture"
    default_auto_field = "django.db.models.BigAutoField"
