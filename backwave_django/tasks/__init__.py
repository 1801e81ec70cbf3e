"""A backend for Django's own Tasks framework (``django.tasks``, Django 6), on backwave's guarantees.

One line of settings makes every ``@task`` function a job with leases, the (worker, attempt) fence, retries,
time limits, crash recovery and the admin, run by ``manage.py backwave_pump``::

    TASKS = {"default": {"BACKEND": "backwave_django.tasks.BackwaveBackend", "QUEUES": ["default"]}}

See ``docs/howto/django-tasks.md``. Importing this package needs Django 6 (``django.tasks``).
"""

from .backend import BackwaveBackend
from .errors import AttemptFailed, LeaseExpired, TaskUnroutable

__all__ = ["AttemptFailed", "BackwaveBackend", "LeaseExpired", "TaskUnroutable"]
