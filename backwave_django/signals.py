"""Signals around each Attempt: the job-side twins of ``request_started`` and ``request_finished``.

``attempt_started`` is sent in the worker thread just before the handler runs, ``attempt_finished`` just after
it ends (returned, raised or cancelled), before the Attempt's database connections are closed. Both send
``sender`` (the handler's JobRegistration) and ``context`` (the JobContext).
"""

from django.dispatch import Signal

attempt_started = Signal()
attempt_finished = Signal()
