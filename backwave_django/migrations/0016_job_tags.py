"""Job tags: one row per (job, tag), unique, with an index that leads with the tag (the admin's filter and
prefix search).

On MariaDB the new table is converted to the binary collation ``utf8mb4_bin`` as migration 0011 did the
others, so tags compare exactly (``Urgent`` is not ``urgent``), as on PostgreSQL, SQLite and in memory.

On PostgreSQL the tag column keeps ten times the default statistics (1,000 most common values), so that the
planner knows a rare tag for what it is: with a few common tags and one rare one, the default estimate took the
rare one for common and walked the whole job table backwards to find its 20 jobs (1.4 s at 1,000,000 jobs,
against 0.2 ms with the larger statistics).
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

TABLE = "backwave_django_jobtag"


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(f"ALTER TABLE {TABLE} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN tag SET STATISTICS 1000")


class Migration(migrations.Migration):
    atomic = False  # MariaDB cannot roll DDL back, and Django refuses RunPython DDL in a transaction there
    dependencies = [("backwave_django", "0015_dependencies")]
    operations = [
        migrations.CreateModel(
            name="JobTag",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("tag", models.CharField(max_length=193)),
                (
                    "job",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tags",
                        to="backwave_django.job",
                    ),
                ),
            ],
            options={
                "verbose_name": "job tag",
                "indexes": [
                    models.Index(
                        fields=["tag", "job"],
                        name="backwave_jobtag_tag",
                        opclasses=["varchar_pattern_ops", "int8_ops"],
                    )
                ],
                "constraints": [models.UniqueConstraint(fields=("job", "tag"), name="backwave_jobtag_unique")],
            },
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
    ]
