"""MariaDB only: a stand-in for the partial unique constraint ``backwave_job_unique_live``.

MariaDB has no partial unique indexes, so Django does not create that constraint there. A virtual column that
holds the job's unique key only while the job is unfinished, with a unique index over (wire name, that column),
guarantees the same thing: MariaDB lets many rows share a NULL, so finished jobs and jobs without a key are not
constrained. Nothing happens on other databases.
"""

from typing import Any

from django.db import migrations

UNIQUE_INDEX = "backwave_job_unique_mariadb"


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(
            "ALTER TABLE backwave_django_job ADD COLUMN unique_live VARCHAR(255) AS "
            "(IF(state IN ('scheduled', 'awaiting_parent', 'leased'), unique_key, NULL)) VIRTUAL"
        )
        schema_editor.execute(f"CREATE UNIQUE INDEX {UNIQUE_INDEX} ON backwave_django_job (wire_name, unique_live)")


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(f"DROP INDEX {UNIQUE_INDEX} ON backwave_django_job")
        schema_editor.execute("ALTER TABLE backwave_django_job DROP COLUMN unique_live")


class Migration(migrations.Migration):
    atomic = False  # MariaDB cannot roll DDL back, and Django refuses RunPython DDL in a transaction there
    dependencies = [("backwave_django", "0012_job_output_unique_priority_trace")]
    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
