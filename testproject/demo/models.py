from django.db import models


class Greeting(models.Model):
    """A row each demo email job writes, so the demo shows handlers using the ORM per Attempt."""

    user_id = models.IntegerField()
    attempt = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"greeting for user {self.user_id}"


class NightlyReport(models.Model):
    """What the ``nightly-report`` schedule produces. Its foreign key to the job that wrote it is PROTECT, so
    retention keeps that job (and its outcomes) for as long as the report exists."""

    job = models.ForeignKey("backwave_django.Job", on_delete=models.PROTECT, related_name="+")
    night = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"report of job {self.job_id}"
