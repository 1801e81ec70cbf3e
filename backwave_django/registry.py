"""The ``@job`` decorator, JobRegistration, and the registry of handlers by wire name.

A wire name is the job's stable identity in the database: explicit, mandatory, never derived from a module
or function name, so code can move without orphaning queued jobs. Registering one wire name twice is an error
at import time that names both handlers.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from . import codec
from .context import JobContext
from .core.dependencies import MAX_PARENTS, RunOn
from .core.names import queue_name_problem, unique_key_problem, wire_name_problem
from .core.retry import MAX_ATTEMPTS_LIMIT
from .core.tags import TagError, normalise_all
from .store.bounds import priority_problem

if TYPE_CHECKING:
    from .models import Job
    from .store.contract import NewJob
    from .workflows import Step

P = ParamSpec("P")
R = TypeVar("R")


class JobDefinitionError(Exception):
    """A ``@job`` declaration is wrong (bad wire name, duplicate registration, unusable signature)."""


class UnknownJob(LookupError):
    """No handler is registered for a wire name."""


def _describe(target: object) -> str:
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def _context_parameter(signature: inspect.Signature) -> str | None:
    for name, parameter in signature.parameters.items():
        annotation = parameter.annotation
        if annotation is JobContext or annotation in ("JobContext", "backwave_django.JobContext"):
            return name
    return "context" if "context" in signature.parameters else None


def _misfit(signature: inspect.Signature, names: tuple[str, ...]) -> str | None:
    """Why keyword arguments by these names, in this order, do not fit ``signature``, or None. Binding
    keyword arguments looks at their names only, so each registration keeps the answer by names."""
    try:
        signature.bind(**dict.fromkeys(names))
    except TypeError as exc:
        return str(exc)
    return None


#: At most this many sets of argument names are remembered per registration (then it starts again).
MAX_KNOWN_MISFITS = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRegistration:
    """One registered job: its wire name, its defaults, and how to run it."""

    wire_name: str
    queue: str
    max_attempts: int | None  # None: BACKWAVE['RETRY']['MAX_ATTEMPTS']
    timeout: timedelta | None  # None: the worker group's TIMEOUT
    target: Callable[..., Any]  # the function, or the class whose instance runs per Attempt
    is_class: bool
    signature: inspect.Signature = field(repr=False)  # the payload's parameters (no context, no self)
    context_parameter: str | None
    priority: int = 0  # the claim order within the queue: higher first
    is_async: bool = False  # an ``async def`` handler (or run method): it runs on the Pump's event loop
    #: What :func:`_misfit` said of each tuple of argument names (a signature is costly to hash as a key).
    _misfits: dict[tuple[str, ...], str | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    #: When every parameter is an ordinary one (named, positional or keyword, no ``*`` or ``**``): their names
    #: in order, those that have no default (they come first), and all of them as a set, for :meth:`bind`'s
    #: quick way; None otherwise.
    _ordinary: tuple[tuple[str, ...], int, frozenset[str]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        parameters = list(self.signature.parameters.values())
        if all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters):
            names = tuple(p.name for p in parameters)
            required = sum(1 for p in parameters if p.default is p.empty)
            object.__setattr__(self, "_ordinary", (names, required, frozenset(names)))

    @property
    def handler_path(self) -> str:
        return _describe(self.target)

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments by parameter name, checked against the signature. Raises TypeError naming the job."""
        if self._ordinary is not None:  # quick ways to what Signature.bind gives, in the signature's order
            names, required, known = self._ordinary
            if not kwargs and required <= len(args) <= len(names):
                return dict(zip(names, args, strict=False))
            if not args and kwargs.keys() <= known and all(name in kwargs for name in names[:required]):
                return {name: kwargs[name] for name in names if name in kwargs}
        parameters = self.signature.parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        unknown = sorted(set(kwargs) - set(parameters)) if not takes_any else []
        if unknown:
            raise TypeError(
                f"{self.wire_name!r} ({self.handler_path}{self.signature}) got unexpected argument(s) "
                f"{', '.join(map(repr, unknown))}"
            )
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.wire_name!r} ({self.handler_path}{self.signature}): {exc}") from None
        return dict(bound.arguments)

    def decode(self, payload: str) -> dict[str, Any]:
        """The stored arguments, checked against today's signature. Raises PayloadDecodeError."""
        arguments = codec.decode(payload)
        names = tuple(arguments)
        known = self._misfits
        if names in known:
            problem = known[names]
        else:
            if len(known) >= MAX_KNOWN_MISFITS:
                known.clear()
            problem = known[names] = _misfit(self.signature, names)
        if problem is not None:
            message = f"payload does not fit {self.handler_path}{self.signature}: {problem}"
            raise codec.PayloadDecodeError(message)
        return arguments

    def new_instance(self, context: JobContext) -> Any:
        """For a class job: the per-Attempt instance (its __init__ may take the context)."""
        init = inspect.signature(self.target)
        return self.target(context) if init.parameters else self.target()

    def execute(self, arguments: Mapping[str, Any], context: JobContext) -> Any:
        """Run the handler once, inside the caller's per-Attempt scope. For an async handler this returns
        the coroutine, which the caller awaits."""
        kwargs = dict(arguments)
        if self.context_parameter:
            kwargs[self.context_parameter] = context
        if not self.is_class:
            return self.target(**kwargs)
        instance = self.new_instance(context)
        if isinstance(instance, AbstractContextManager):
            instance = context.scope.enter_context(instance)
        elif callable(getattr(instance, "close", None)):
            context.scope.callback(instance.close)
        return instance.run(**kwargs)


class Registry:
    """Registered jobs by wire name. One per process: :data:`registry`."""

    def __init__(self) -> None:
        self._by_wire_name: dict[str, JobRegistration] = {}

    def register(self, registration: JobRegistration) -> None:
        """Add a registration (``@job`` does). Registering a wire name again with another handler raises
        :class:`JobDefinitionError` naming both."""
        existing = self._by_wire_name.get(registration.wire_name)
        if existing is not None and existing.handler_path != registration.handler_path:
            raise JobDefinitionError(
                f"wire name {registration.wire_name!r} is registered twice: by {existing.handler_path} "
                f"and by {registration.handler_path}. Wire names must be unique; rename one of them."
            )
        self._by_wire_name[registration.wire_name] = registration

    def unregister(self, wire_name: str) -> None:
        """Forget a wire name; one that is not registered is ignored."""
        self._by_wire_name.pop(wire_name, None)

    def get(self, wire_name: str) -> JobRegistration:
        """The registration for ``wire_name``; raises :class:`UnknownJob` when none is registered."""
        try:
            return self._by_wire_name[wire_name]
        except KeyError:
            raise UnknownJob(
                f"no job is registered under the wire name {wire_name!r} in this process; a worker imports "
                "each installed app's jobs.py (and tasks.py, with the django.tasks backend) when it starts: "
                "define the job or task there, or import it from there"
            ) from None

    def __contains__(self, wire_name: object) -> bool:
        return wire_name in self._by_wire_name

    def all(self) -> list[JobRegistration]:
        """Every registration, sorted by wire name."""
        return sorted(self._by_wire_name.values(), key=lambda r: r.wire_name)


registry = Registry()


def _due_at(run_after: datetime | timedelta | None, now: datetime) -> datetime:
    if run_after is None:
        return now
    if isinstance(run_after, timedelta):
        return now + run_after
    if isinstance(run_after, datetime):
        if run_after.tzinfo is None or run_after.utcoffset() is None:
            raise ValueError(
                f"run_after={run_after!r} is a naive datetime; pass an aware one (django.utils.timezone) "
                "or a timedelta"
            )
        return run_after
    raise TypeError(f"run_after must be an aware datetime or a timedelta, not {type(run_after).__name__}")


#: The longest time limit a job may set for one Attempt.
MAX_TIMEOUT = timedelta(days=7)


def _check_options(
    *,
    queue: object = None,
    max_attempts: object = None,
    timeout: object = None,
    priority: object = None,
    unique_key: object = None,
) -> None:
    """The per-job options, checked the same way at definition (``@job``) and per call (``using``)."""
    if queue is not None and (problem := queue_name_problem(queue)):
        raise JobDefinitionError(problem)
    if priority is not None and (problem := priority_problem(priority)):
        raise JobDefinitionError(problem)
    if unique_key is not None and (problem := unique_key_problem(unique_key)):
        raise JobDefinitionError(problem)
    bad_count = (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
    )
    if max_attempts is not None and bad_count:
        raise JobDefinitionError(
            f"max_attempts must be an int from 1 to {MAX_ATTEMPTS_LIMIT}, or None; got {max_attempts!r}"
        )
    if timeout is not None:
        _timeout(timeout)


def _timeout(value: object) -> timedelta | None:
    """A time limit given as a timedelta or a number of seconds, checked: (0, 7 days]."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        limit = value
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        limit = timedelta(seconds=min(float(value), MAX_TIMEOUT.total_seconds() + 1))
    else:
        raise JobDefinitionError(
            f"timeout must be a number of seconds or a timedelta, or None; got {value!r}"
        )
    if not timedelta(0) < limit <= MAX_TIMEOUT:
        raise JobDefinitionError(f"timeout must be more than 0 and at most 7 days; got {value!r}")
    return limit


def _tags(given: object, earlier: tuple[str, ...]) -> tuple[str, ...]:
    """``earlier`` and the tags ``given`` to ``using``, in their stored forms, each once."""
    try:
        return normalise_all(given, adding_to=earlier)
    except TagError as exc:
        raise JobDefinitionError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class _Options:
    queue: str | None = None
    run_after: datetime | timedelta | None = None
    max_attempts: int | None = None
    timeout: timedelta | None = None
    priority: int | None = None
    unique_key: str | None = None
    tags: tuple[str, ...] = ()  # stored forms, sorted
    depends_on: tuple[int, ...] = ()
    run_on: RunOn = RunOn.SUCCESS


def _parent_ids(depends_on: object) -> tuple[int, ...]:
    """The job ids in ``depends_on`` (jobs, as enqueue returns them, or ids), checked."""
    if isinstance(depends_on, str | bytes) or not isinstance(depends_on, Iterable):
        raise JobDefinitionError(
            f"depends_on must be a list of jobs (as enqueue returns them) or job ids, got {depends_on!r}"
        )
    ids = []
    for parent in depends_on:
        job_id = getattr(parent, "id", parent)
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
            raise JobDefinitionError(
                f"depends_on holds {parent!r}: each parent must be a job (as enqueue returns it) or its id"
            )
        ids.append(job_id)
    unique = tuple(dict.fromkeys(ids))
    if len(unique) > MAX_PARENTS:
        raise JobDefinitionError(
            f"a job may depend on at most {MAX_PARENTS} parents, got {len(unique)}: chain them through an "
            "intermediate job (a group of at most that many, then a child of the group)"
        )
    return unique


def _run_on(value: object) -> RunOn:
    try:
        return RunOn(str(value)) if isinstance(value, str) else RunOn(value)  # type: ignore[arg-type]
    except ValueError:
        choices = " or ".join(repr(r.value) for r in RunOn)
        raise JobDefinitionError(f"run_on must be {choices}, got {value!r}") from None


class JobFunction[**P, R]:
    """What ``@job`` returns: call it to run the handler now, or ``enqueue`` it to run in the background."""

    def __init__(self, registration: JobRegistration, options: _Options | None = None) -> None:
        self.registration = registration
        self._options = options or _Options()
        self.__wrapped__ = registration.target
        self.__doc__ = registration.target.__doc__
        self.__name__ = getattr(registration.target, "__name__", registration.wire_name)

    @property
    def wire_name(self) -> str:
        return self.registration.wire_name

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the handler directly, in this thread, with no job involved."""
        return self.registration.target(*args, **kwargs)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<job {self.wire_name!r} -> {self.registration.handler_path}>"

    def using(
        self,
        *,
        queue: str | None = None,
        run_after: datetime | timedelta | None = None,
        max_attempts: int | None = None,
        timeout: timedelta | float | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        tags: Iterable[str | tuple[str, str]] | None = None,
        depends_on: Iterable[Any] | None = None,
        run_on: str | None = None,
    ) -> JobFunction[P, R]:
        """The same job with per-call overrides: another queue, a later start, another attempt ceiling,
        another time limit per Attempt (a timedelta or seconds), another priority (-100 to 100, higher is
        claimed first within the queue), a unique key (at most one unfinished job of this wire name holds
        it: enqueueing another returns the holder, marked ``duplicate``), tags (labels ``"urgent"`` and keyed
        tags ``("tenant", "acme")``, added to those of an earlier ``using``), parents to wait on
        (``depends_on``: jobs or ids, at most ``MAX_PARENTS``) and when to start after them (``run_on``:
        ``"success"``, the default, once all succeeded; ``"any"``, once all finished)."""
        _check_options(
            queue=queue, max_attempts=max_attempts, timeout=timeout, priority=priority, unique_key=unique_key
        )
        parents = _parent_ids(depends_on) if depends_on is not None else None
        rule = _run_on(run_on) if run_on is not None else None
        old = self._options
        all_tags = old.tags if tags is None else _tags(tags, old.tags)
        merged = _Options(
            queue=queue if queue is not None else old.queue,
            run_after=run_after if run_after is not None else old.run_after,
            max_attempts=max_attempts if max_attempts is not None else old.max_attempts,
            timeout=_timeout(timeout) if timeout is not None else old.timeout,
            priority=priority if priority is not None else old.priority,
            unique_key=unique_key if unique_key is not None else old.unique_key,
            tags=all_tags,
            depends_on=parents if parents is not None else old.depends_on,
            run_on=rule if rule is not None else old.run_on,
        )
        return JobFunction(self.registration, merged)

    def step(self, *args: P.args, **kwargs: P.kwargs) -> Step:
        """This job with these arguments, not enqueued yet: a step for ``chain`` and ``group``
        (``backwave_django.workflows``), which enqueue a whole graph in one transaction."""
        from .workflows import Step

        return Step(function=self, arguments=self.registration.bind(args, kwargs))

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Store one job (inside the caller's transaction, if any) and return it. With a unique key that an
        unfinished job holds, nothing is written and that job comes back with ``duplicate`` True."""
        return self._enqueue([self.registration.bind(args, kwargs)])[0]

    def enqueue_many(self, calls: Iterable[Mapping[str, Any] | tuple[Any, ...]]) -> list[Job]:
        """Store many jobs of this kind in one round-trip. Each call is a dict of keyword arguments or a
        tuple of positional ones. Any bad call refuses the whole batch. With a unique key, the first call
        holds it and the others come back as duplicates of it."""
        bound = []
        for index, call in enumerate(calls):
            args, kwargs = ((), call) if isinstance(call, Mapping) else (call, {})
            try:
                bound.append(self.registration.bind(tuple(args), kwargs))
            except TypeError as exc:
                raise TypeError(f"call {index} of enqueue_many: {exc}") from None
        return self._enqueue(bound)

    def _enqueue(self, arguments: list[dict[str, Any]]) -> list[Job]:
        from django.utils import timezone

        from . import conf, telemetry
        from .store import get_store

        settings = conf.get()
        now = timezone.now()
        store = get_store(settings.database)
        new_jobs: list[NewJob] = []

        # The store asks for the jobs, maybe in parts, so that it can write one part while we encode the next.
        def make(start: int, stop: int) -> list[NewJob]:
            part = self._new_jobs(arguments[start:stop], now, first=start)
            new_jobs.extend(part)
            return part

        count = len(arguments)
        enqueued = store.enqueue_in_parts(count, make, now=now, max_payload_bytes=settings.max_payload_bytes)
        telemetry.enqueued(self._options.queue or self.registration.queue, count)
        return job_rows(new_jobs, enqueued, now, store.using)

    def _new_jobs(
        self, arguments: list[dict[str, Any]], now: datetime, parents: tuple[int, ...] = (), *, first: int = 0
    ) -> list[NewJob]:
        """The jobs to store for these calls, with the defaults applied (``parents``: more to wait on;
        ``first``: the number of the first of these calls in its batch)."""
        from . import conf, telemetry
        from .store import NewJob

        settings = conf.get()
        options, reg = self._options, self.registration
        queue = options.queue or reg.queue
        due_at = _due_at(options.run_after, now)
        max_attempts = options.max_attempts or reg.max_attempts or settings.retry.max_attempts
        timeout = options.timeout or reg.timeout
        priority = reg.priority if options.priority is None else options.priority
        payloads = []
        for index, call in enumerate(arguments, first):
            try:
                payloads.append(codec.encode(call))
            except codec.PayloadError as exc:
                many = first or len(arguments) > 1
                where = f"call {index} of {reg.wire_name!r}" if many else repr(reg.wire_name)
                raise codec.PayloadError(f"cannot enqueue {where}: {exc}") from None
        trace_context = telemetry.trace_context()
        all_parents = tuple(dict.fromkeys((*options.depends_on, *parents))) if parents else options.depends_on
        return [
            NewJob(
                wire_name=reg.wire_name,
                payload=p,
                queue=queue,
                due_at=due_at,
                max_attempts=max_attempts,
                timeout=timeout,
                priority=priority,
                unique_key=options.unique_key,
                trace_context=trace_context,
                tags=options.tags,
                parents=all_parents,
                run_on=options.run_on,
            )
            for p in payloads
        ]


def job_rows(new_jobs: list[Any], enqueued: list[Any], now: datetime, using: str) -> list[Job]:
    """The enqueued jobs as model instances, without reading them back; a duplicate (its key was held) is
    the job that holds the key, read from the database, with ``duplicate`` True."""
    from .models import Job

    holders = Job.objects.using(using).in_bulk([done.id for done in enqueued if done.duplicate])
    make = _row_maker(Job, using)
    rows = []
    for new, done in zip(new_jobs, enqueued, strict=True):
        row = holders[done.id] if done.duplicate else make(new, done, now)
        row.duplicate = done.duplicate
        rows.append(row)
    return rows


def _row_maker(model: type[Job], using: str) -> Callable[[Any, Any, datetime], Job]:
    """Builds the model instance of a job just written. The first goes through the model's ``__init__``;
    the others copy its attributes and set the job's own, which a batch of thousands needs (``__init__``
    was two thirds of ``enqueue_many``'s time in the client). Where something listens to the model's
    ``pre_init`` or ``post_init`` signals, every instance goes through ``__init__``, so listeners see all."""
    from django.db.models.base import ModelState
    from django.db.models.signals import post_init, pre_init

    template: dict[str, Any] = {}
    copy = not (pre_init.has_listeners(model) or post_init.has_listeners(model))
    shared: dict[str, Any] = {}  # the template with the fields the last job shares with its batch
    last: list[Any] = [None]

    def make(new: Any, done: Any, now: datetime) -> Job:
        own = {
            "id": done.id, "payload": new.payload, "created_at": now, "state": done.state,
            "parents_remaining": done.parents_remaining, "has_children": False,
            "terminal_cause": done.terminal_cause, "terminal_at": now if done.state.is_terminal else None,
        }  # fmt: skip
        if template:
            if not _same_batch(new, last[0]):  # a batch's jobs share these objects: copied once
                shared.clear()
                shared.update(template, **_batch_fields(new))
                last[0] = new
            row = model.__new__(model)
            state = ModelState()
            state.adding, state.db = False, using
            fields = row.__dict__
            fields.update(shared)
            fields.update(own)
            fields["_state"] = state
            return row
        row = model(**own, **_batch_fields(new))
        row._state.adding, row._state.db = False, using
        if copy:
            template.update((k, v) for k, v in row.__dict__.items() if k != "_state")
        return row

    return make


def _batch_fields(new: Any) -> dict[str, Any]:
    """The fields of a job written that the other jobs of its batch usually share."""
    return {
        "wire_name": new.wire_name, "queue": new.queue, "max_attempts": new.max_attempts,
        "due_at": new.due_at, "timeout": new.timeout, "priority": new.priority, "unique_key": new.unique_key,
        "trace_context": new.trace_context, "run_on": new.run_on,
    }  # fmt: skip


def _same_batch(new: Any, other: Any) -> bool:
    """Whether ``new`` holds the very objects ``other`` holds in each of :func:`_batch_fields`."""
    return other is not None and (
        new.wire_name is other.wire_name
        and new.queue is other.queue
        and new.max_attempts is other.max_attempts
        and new.due_at is other.due_at
        and new.timeout is other.timeout
        and new.priority is other.priority
        and new.unique_key is other.unique_key
        and new.trace_context is other.trace_context
        and new.run_on is other.run_on
    )


def _payload_signature(target: Callable[..., Any], is_class: bool) -> tuple[inspect.Signature, str | None]:
    function = getattr(target, "run", None) if is_class else target
    if function is None or not callable(function):
        raise JobDefinitionError(f"class job {_describe(target)} needs a run(self, ...) method")
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())
    if is_class:
        parameters = parameters[1:]  # self
        signature = signature.replace(parameters=parameters)
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.POSITIONAL_ONLY):
            raise JobDefinitionError(
                f"{_describe(target)}: parameter {parameter.name!r} must be nameable, because a payload "
                "stores arguments by name; use ordinary or keyword-only parameters"
            )
    context = _context_parameter(signature)
    if context is not None:
        signature = signature.replace(parameters=[p for p in parameters if p.name != context])
    return signature, context


def job(
    wire_name: str,
    *,
    queue: str = "default",
    max_attempts: int | None = None,
    timeout: timedelta | float | None = None,
    priority: int = 0,
) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Register a function (or a class with a ``run`` method) as a job under an explicit wire name.

    >>> @job("send-welcome-email", queue="emails", max_attempts=5)
    ... def send_welcome_email(user_id: int) -> None: ...
    >>> send_welcome_email.enqueue(user_id=42)
    """
    if callable(wire_name) or not isinstance(wire_name, str):
        raise JobDefinitionError(
            "@job needs an explicit wire name, e.g. @job('send-welcome-email'); it is the job's identity in "
            "the database and is never derived from the function's name"
        )
    problem = wire_name_problem(wire_name)
    if problem:
        raise JobDefinitionError(problem)
    _check_options(queue=queue, max_attempts=max_attempts, timeout=timeout, priority=priority)

    def decorate(target: Callable[P, R]) -> JobFunction[P, R]:
        is_class = inspect.isclass(target)
        signature, context = _payload_signature(target, is_class)
        registration = JobRegistration(
            wire_name=wire_name,
            queue=queue,
            max_attempts=max_attempts,
            timeout=_timeout(timeout),
            target=target,
            is_class=is_class,
            signature=signature,
            context_parameter=context,
            priority=priority,
            is_async=inspect.iscoroutinefunction(getattr(target, "run", None) if is_class else target),
        )
        registry.register(registration)
        return JobFunction(registration)

    return decorate
