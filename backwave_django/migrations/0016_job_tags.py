"""Job tags: one row per (job, tag), unique, with an index that leads with the tag (the admin's filter and
prefix search).

On MariaDB the new table is converted to the binary collation ``utf8mb4_bin`` as migration 0011 did the
others, so tags compare exactly (``Urgent`` is not ``urgent``), as on PostgreSQL, SQLite and in memory.
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

TABLE = "backwave_django_jobtag"


def mariadb_forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(f"ALTER TABLE {TABLE} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")


class Migration(migrations.Migration):
    atomic = False  # MariaDB cannot roll DDL back, and Django refuses RunPython DDL in a transaction there
    dependencies = [("backwave_django", "0014_claim_order_priority")]
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
        migrations.RunPython(mariadb_forwards, migrations.RunPython.noop, elidable=False),
    ]
