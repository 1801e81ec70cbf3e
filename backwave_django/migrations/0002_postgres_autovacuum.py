"""PostgreSQL only: vacuum the job, lease and outcome tables far more often than the server default.

These tables churn like a queue: every job is updated twice and leaves a dead row version each time. With
the default thresholds (20 % of the table) a large table waits long for autovacuum while its claim index
fills with dead entries, and claims slow down. Nothing happens on other databases.
"""

from typing import Any

from django.db import migrations

TABLES = ("backwave_django_job", "backwave_django_lease", "backwave_django_outcome")
TUNED = "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 1"
DEFAULTS = "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay"


def tune(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} SET ({TUNED})")


def untune(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} RESET ({DEFAULTS})")


class Migration(migrations.Migration):
    dependencies = [("backwave_django", "0001_initial")]
    operations = [migrations.RunPython(tune, untune, elidable=False)]
