"""MariaDB only (Django's mysql backend): exact text comparison, and an index that claims can use.

- The tables are converted to utf8mb4 with the binary collation ``utf8mb4_bin``. A default collation
  (``utf8mb4_general_ci``) compares case- and accent-insensitively, so queue ``Emails`` would be queue
  ``emails``: pausing one would pause both, and one would claim the other's jobs. Binary comparison is what
  PostgreSQL, SQLite and the in-memory store do. Columns added or altered later inherit the tables' collation;
  a table created by a later migration must be converted by it.
- MariaDB has no partial indexes: Django creates ``backwave_job_claimable`` on (queue, due_at, id) for every
  job, finished ones too, and a claim would walk a queue's whole history to reach its scheduled jobs. The index
  added here leads with the state, so a claim reads only the due scheduled jobs of its queue, in claim order,
  and locks only the rows it takes.
- For the same reason the partial unique constraint ``backwave_job_schedule_tick`` is not created there; the
  unique index added here stands in for it (MariaDB lets many rows share a NULL, so enqueued jobs, which
  have no schedule, are not constrained), so a schedule's tick is stored at most once on MariaDB too.

Nothing happens on other databases. Both are rebuilds of the tables: on a large existing table, run it in a
quiet hour.
"""

from typing import Any

from django.db import migrations

TABLES = (
    "backwave_django_job",
    "backwave_django_lease",
    "backwave_django_outcome",
    "backwave_django_queuesettings",
    "backwave_django_auditrecord",
    "backwave_django_pumpstatus",
    "backwave_django_schedule",
)
CLAIM_INDEX = "backwave_job_claim_mariadb"
TICK_INDEX = "backwave_job_tick_mariadb"


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        schema_editor.execute(
            f"CREATE INDEX {CLAIM_INDEX} ON backwave_django_job (queue, state, due_at, id)"
        )
        schema_editor.execute(
            f"CREATE UNIQUE INDEX {TICK_INDEX} ON backwave_django_job (schedule, scheduled_for)"
        )


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(f"DROP INDEX {TICK_INDEX} ON backwave_django_job")
        schema_editor.execute(f"DROP INDEX {CLAIM_INDEX} ON backwave_django_job")
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb4")


class Migration(migrations.Migration):
    atomic = False  # MariaDB cannot roll DDL back, and Django refuses RunPython DDL in a transaction there
    dependencies = [("backwave_django", "0010_purge_index")]
    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
