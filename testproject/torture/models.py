from django.db import models


class Execution(models.Model):
    """One handler run, written by the handler inside its own transaction: what ran, not what was reported."""

    job_id = models.BigIntegerField(db_index=True)
    attempt = models.PositiveIntegerField()
    worker = models.CharField(max_length=255)
    at = models.DateTimeField(auto_now_add=True)
    finished = models.BooleanField(
        default=False, help_text="The handler returned (it may still be reported)."
    )

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt} on {self.worker}"
