"""The claim order within a queue becomes (priority, highest first; due time; id), and its index follows.

The new partial index is built before the old one is dropped, so claims always have one. On MariaDB, which has
no partial indexes, the stand-in index of migration 0011 gets the priority too.
"""

from typing import Any

from django.db import migrations, models

MARIADB_OLD = "backwave_job_claim_mariadb"
MARIADB_NEW = "backwave_job_claim_order_mariadb"


def mariadb_forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(
            f"CREATE INDEX {MARIADB_NEW} ON backwave_django_job (queue, state, priority DESC, due_at, id)"
        )
        schema_editor.execute(f"DROP INDEX {MARIADB_OLD} ON backwave_django_job")


def mariadb_backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(f"CREATE INDEX {MARIADB_OLD} ON backwave_django_job (queue, state, due_at, id)")
        schema_editor.execute(f"DROP INDEX {MARIADB_NEW} ON backwave_django_job")


class Migration(migrations.Migration):
    atomic = False  # MariaDB cannot roll DDL back, and Django refuses RunPython DDL in a transaction there
    dependencies = [("backwave_django", "0013_mariadb_unique_live")]
    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("state", "scheduled")),
                fields=["queue", "-priority", "due_at", "id"],
                name="backwave_job_claim_order",
            ),
        ),
        migrations.RemoveIndex(model_name="job", name="backwave_job_claimable"),
        migrations.RunPython(mariadb_forwards, mariadb_backwards, elidable=False),
    ]
