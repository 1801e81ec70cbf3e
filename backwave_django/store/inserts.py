"""How the portable store writes new jobs: runs of plain jobs in bulk, each keyed job on its own.

A job with a ``unique_key`` is written only if no unfinished job of its wire name holds the key already;
otherwise the holder's id comes back, marked ``duplicate``, and nothing is written for it. The database's
partial unique index (``backwave_job_unique_live``; on MariaDB its stand-in, migration 0013) is what
guarantees it, whatever runs at the same time: the store reads the holder first (the usual case costs no
failed insert), inserts in a savepoint when there is none, and if a concurrent enqueue took the key between
the two, the index refuses the insert and the store reads the holder again. A rollback of the caller's
transaction takes the key with it, so no lock can be left behind.

Plain jobs are written in the order given, so their ids (the claim order's tiebreak) follow it; keyed
jobs come after them, in the order of their keys, so that concurrent batches sharing keys lock them in one
order and never deadlock each other. (Two transactions of the caller's that enqueue the same keys one call at
a time, in opposite orders, can still deadlock, like any two transactions writing the same rows: the database
then rolls one back.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from ..core.states import LIVE_STATES
from ..models import Job
from .contract import EnqueuedJob, NewJob, StoreError
from .order import inserts_order

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
        trace_context=new.trace_context,
    )


def insert_all(
    store: DjangoStore,
    jobs: Sequence[NewJob],
    now: datetime,
    insert_keyed: Callable[[NewJob, datetime], int | None],
) -> list[EnqueuedJob]:
    """Write ``jobs``: the plain ones in one bulk insert, in the order given, then the keyed ones one by one
    through ``insert_keyed`` (which returns the new id, or None when an unfinished job holds the key), in the
    order of their (wire name, key), so that two transactions enqueueing the same keys never deadlock."""
    done: list[EnqueuedJob | None] = [None] * len(jobs)
    order = inserts_order(jobs)
    plain = [i for i in order if jobs[i].unique_key is None]
    rows = [new_row(jobs[i], now) for i in plain]
    if rows:
        largest = max(len(row.payload) + len(row.wire_name) + len(row.trace_context) for row in rows)
        Job.objects.using(store.using).bulk_create(rows, batch_size=store._insert_batch_size(largest))
        for i, row in zip(plain, rows, strict=True):
            done[i] = EnqueuedJob(id=row.id)
    holders: dict[tuple[str, str], int] = {}  # keys taken earlier in this batch
    for i in order[len(plain) :]:
        key = _key(jobs[i])
        if key not in holders:
            done[i] = _keyed(store, jobs[i], now, insert_keyed)
            holders[key] = done[i].id  # type: ignore[union-attr]
        else:
            done[i] = EnqueuedJob(id=holders[key], duplicate=True)
    written = [r for r in done if r is not None]
    store._add_tags((r.id, new.tags) for new, r in zip(jobs, written, strict=True) if not r.duplicate)
    return written


def _key(new: NewJob) -> tuple[str, str]:
    return new.wire_name, new.unique_key or ""


def _keyed(
    store: DjangoStore, new: NewJob, now: datetime, insert_keyed: Callable[[NewJob, datetime], int | None]
) -> EnqueuedJob:
    assert new.unique_key is not None
    for _ in range(KEYED_TRIES):
        holder = live_holder(store, new.wire_name, new.unique_key)
        if holder is not None:
            return EnqueuedJob(id=holder, duplicate=True)
        job_id = insert_keyed(new, now)
        if job_id is not None:
            return EnqueuedJob(id=job_id)
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
