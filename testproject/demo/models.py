from django.db import models


class Greeting(models.Model):
    """A row each demo email job writes, so the demo shows handlers using the ORM per Attempt."""

    user_id = models.IntegerField()
    attempt = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"greeting for user {self.user_id}"
