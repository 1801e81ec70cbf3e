"""Exception classes that name, in a ``TaskError``, how an Attempt ended when no exception of the task's own
ended it (Django's ``TaskError.exception_class`` imports the class by its dotted path)."""


class AttemptFailed(Exception):
    """The Attempt failed without an exception of the task's own: it ran past its time limit, say."""


class LeaseExpired(Exception):
    """The worker running the Attempt stopped reporting (it crashed, or lost the database) and its lease
    lapsed: the Attempt counts, and the task runs again unless that was its last."""


class TaskUnroutable(Exception):
    """No worker knew the task, or its stored arguments no longer fit the function: it was quarantined."""
