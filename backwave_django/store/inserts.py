"""How the portable store writes new jobs: runs of plain jobs in bulk, each keyed job on its own.

A job with a ``unique_key`` is written only if no unfinished job of its wire name holds the key already;
otherwise the holder's id comes back, marked ``duplicate``, and nothing is written for it. The database's
partial unique index (``backwave_job_unique_live``; on MariaDB its stand-in, migration 0013) is what
guarantees it, whatever runs at the same time: the store reads the holder first (the usual case costs no
failed insert), inserts in a savepoint when there is none, and if a concurrent enqueue took the key between
the two, the index refuses the insert and the store reads the holder again. A rollback of the caller's
transaction takes the key with it, so no lock can be left behind.

Jobs are written in the order given, so ids (the claim order's tiebreak) follow it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from ..core.states import LIVE_STATES
from ..models import Job
from .contract import EnqueuedJob, NewJob, StoreError

if TYPE_CHECKING:
    from .django import DjangoStore

#: Reads of the holder and inserts a keyed job gets before the store gives up (a key changing hands this
#: often means jobs holding it finish as fast as they are enqueued).
KEYED_TRIES = 5


def new_row(new: NewJob, now: datetime) -> Job:
    return Job(
        wire_name=new.wire_name,
        queue=new.queue,
        payload=new.payload,
        max_attempts=new.max_attempts,
        due_at=new.due_at,
        created_at=now,
        timeout=new.timeout,
        priority=new.priority,
        unique_key=new.unique_key,
    )


def insert_all(
    store: DjangoStore,
    jobs: Sequence[NewJob],
    now: datetime,
    insert_keyed: Callable[[NewJob, datetime], int | None],
) -> list[EnqueuedJob]:
    """Write ``jobs`` in order (plain runs through ``bulk_create``, keyed jobs through ``insert_keyed``, which
    returns the new id or None when an unfinished job holds the key)."""
    done: list[EnqueuedJob] = []
    run: list[Job] = []
    holders: dict[tuple[str, str], int] = {}  # keys taken earlier in this batch

    def flush() -> None:
        if run:
            largest = max(len(row.payload) + len(row.wire_name) for row in run)
            batch = store._insert_batch_size(largest)
            Job.objects.using(store.using).bulk_create(run, batch_size=batch)
            done.extend(EnqueuedJob(id=row.id) for row in run)
            run.clear()

    for new in jobs:
        if new.unique_key is None:
            run.append(new_row(new, now))
            continue
        flush()
        key = (new.wire_name, new.unique_key)
        if key not in holders:
            holders[key] = _keyed(store, new, now, insert_keyed, done)
        else:
            done.append(EnqueuedJob(id=holders[key], duplicate=True))
    flush()
    return done


def _keyed(
    store: DjangoStore,
    new: NewJob,
    now: datetime,
    insert_keyed: Callable[[NewJob, datetime], int | None],
    done: list[EnqueuedJob],
) -> int:
    assert new.unique_key is not None
    for _ in range(KEYED_TRIES):
        holder = live_holder(store, new.wire_name, new.unique_key)
        if holder is not None:
            done.append(EnqueuedJob(id=holder, duplicate=True))
            return holder
        job_id = insert_keyed(new, now)
        if job_id is not None:
            done.append(EnqueuedJob(id=job_id))
            return job_id
    raise StoreError(
        f"the unique key {new.unique_key!r} of {new.wire_name!r} changed hands {KEYED_TRIES} times while it "
        "was being enqueued; nothing was written for it. Try again."
    )


def live_holder(store: DjangoStore, wire_name: str, unique_key: str) -> int | None:
    """The unfinished job of ``wire_name`` that holds ``unique_key``, if one does."""
    holders = Job.objects.using(store.using).filter(
        wire_name=wire_name, unique_key=unique_key, state__in=LIVE_STATES
    )
    return holders.values_list("id", flat=True).first()


def insert_keyed_in_savepoint(store: DjangoStore, new: NewJob, now: datetime) -> int | None:
    """Insert one keyed job in a savepoint; None when the unique index refused it (the key is taken)."""
    row = new_row(new, now)
    try:
        with transaction.atomic(using=store.using):
            row.save(force_insert=True, using=store.using)
    except IntegrityError:
        return None
    return row.id
