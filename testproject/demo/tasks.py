"""Demo tasks for Django's own Tasks framework (Django 6): TASKS names backwave's backend in the settings, so
these run on backwave's workers with its leases, retries and admin. Workers import this module at start-up."""

import asyncio

from django.tasks import TaskContext, task


@task(queue_name="reports")
def word_count(text: str) -> int:
    return len(text.split())


@task(takes_context=True)
async def greet(context: TaskContext, name: str) -> str:
    """An async task: it runs on the worker's event loop, and knows which Attempt it is."""
    await asyncio.sleep(0.01)
    return f"hello {name} (attempt {context.attempt})"
