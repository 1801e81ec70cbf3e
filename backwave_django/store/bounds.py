"""The bounds every store checks before it writes anything: one set of rules, one set of messages."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.dependencies import RunOn, parents_problem
from ..core.names import queue_name_problem, unique_key_problem, wire_name_problem
from ..core.retry import MAX_ATTEMPTS_LIMIT
from ..core.tags import MAX_TAGS_PER_JOB, stored_tag_problem
from .contract import (
    MAX_CONCURRENCY_LIMIT,
    MAX_JOB_ID,
    MAX_PRIORITY,
    MAX_TRACE_CONTEXT_BYTES,
    MIN_PRIORITY,
    NewJob,
    PayloadTooLarge,
    StoreError,
    WireNameTooLong,
)


def priority_problem(value: object) -> str | None:
    """Why ``value`` is not a valid priority, or None when it is one."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_PRIORITY <= value <= MAX_PRIORITY:
        return f"priority must be an int from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value!r}"
    return None


def check_new_jobs(jobs: Sequence[NewJob], max_payload_bytes: int, *, first: int = 0) -> None:
    """Raise before anything is written when one of ``jobs`` breaks a bound. The fields a batch usually
    shares (everything but the payload) are checked once per distinct set of values, the payload of each;
    a payload's error in a batch names its job (``first``: the number of the first of ``jobs`` in a batch
    sent in parts)."""
    shared: set[tuple[object, ...]] = set()
    previous: NewJob | None = None
    numbered = first > 0 or len(jobs) > 1
    for index, new in enumerate(jobs, first):
        call = index if numbered else None
        if previous is not None and _same_shared(new, previous):  # a batch's jobs share their objects
            _check_payload(new, max_payload_bytes, call)
            continue
        previous = new
        fields = (
            new.wire_name,
            new.queue,
            new.trace_context,
            new.max_attempts,
            new.priority,
            new.unique_key,
            new.tags,
            new.parents,
            new.run_on,
        )  # every field _check_shared reads
        key = (*fields, *(type(value) for value in fields))  # True == 1: a bool must not pass for an int
        try:
            seen = key in shared
        except TypeError:  # an unhashable value: wrong, and _check_shared says how
            seen = False
        if not seen:
            _check_shared(new)
            shared.add(key)
        _check_payload(new, max_payload_bytes, call)


def _same_shared(new: NewJob, other: NewJob) -> bool:
    """Whether ``new`` holds the very objects ``other`` holds in every field :func:`_check_shared` reads."""
    return (
        new.wire_name is other.wire_name
        and new.queue is other.queue
        and new.trace_context is other.trace_context
        and new.max_attempts is other.max_attempts
        and new.priority is other.priority
        and new.unique_key is other.unique_key
        and new.tags is other.tags
        and new.parents is other.parents
        and new.run_on is other.run_on
    )


def _check_payload(new: NewJob, max_payload_bytes: int, call: int | None) -> None:
    """``call``: the job's number in its batch (from 0, as ``enqueue_many`` numbers its calls), None when it
    is alone."""
    of = f"{new.wire_name!r}" if call is None else f"{new.wire_name!r} (job {call} of the batch)"
    try:
        size = len(new.payload.encode("utf-8"))
    except UnicodeEncodeError:
        raise StoreError(f"the payload of {of} is not valid UTF-8 text") from None
    if "\x00" in new.payload:
        raise StoreError(f"the payload of {of} holds a NUL character, which no text column stores")
    if size > max_payload_bytes:
        raise PayloadTooLarge(
            f"the payload of {of} is {size} bytes; the limit is {max_payload_bytes} "
            "(BACKWAVE['MAX_PAYLOAD_BYTES']). Store large data elsewhere and pass a reference."
        )


def _check_shared(new: NewJob) -> None:
    problem = wire_name_problem(new.wire_name)
    if problem:
        raise WireNameTooLong(problem)
    problem = queue_name_problem(new.queue)
    if problem:
        raise StoreError(problem)
    context = new.trace_context
    if not isinstance(context, str) or len(context) > MAX_TRACE_CONTEXT_BYTES or not context.isascii():
        raise StoreError(
            f"the trace context of {new.wire_name!r} must be ASCII text of at most {MAX_TRACE_CONTEXT_BYTES} "
            "bytes (W3C traceparent and tracestate, as backwave_django.telemetry writes it)"
        )
    if not context.isprintable():
        raise StoreError(f"the trace context of {new.wire_name!r} holds a control character")
    attempts = new.max_attempts
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT:
        raise StoreError(f"max_attempts must be an int from 1 to {MAX_ATTEMPTS_LIMIT}, got {attempts!r}")
    problem = priority_problem(new.priority)
    if problem:
        raise StoreError(problem)
    if new.unique_key is not None and (problem := unique_key_problem(new.unique_key)):
        raise StoreError(problem)
    check_tags(new.tags, f"the tags of {new.wire_name!r}")
    if new.parents or not isinstance(new.run_on, RunOn):
        problem = parents_problem(new.parents, new.run_on, max_job_id=MAX_JOB_ID)
        if problem:
            raise StoreError(f"{new.wire_name!r}: {problem}")


def check_tags(tags: object, what: str) -> None:
    """Raise unless ``tags`` is a tuple of at most ``MAX_TAGS_PER_JOB`` stored tags."""
    if type(tags) is not tuple or len(tags) > MAX_TAGS_PER_JOB:
        raise StoreError(f"{what} must be a tuple of at most {MAX_TAGS_PER_JOB} stored tags")
    for tag in tags:
        if problem := stored_tag_problem(tag):
            raise StoreError(f"{what}: {problem}")


def check_concurrency_limit(limit: object) -> None:
    bad = isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_CONCURRENCY_LIMIT
    if limit is not None and bad:
        raise StoreError(
            f"a concurrency limit is an int from 0 to {MAX_CONCURRENCY_LIMIT}, or None (no limit); "
            f"got {limit!r}"
        )
