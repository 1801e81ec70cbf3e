"""The instrumentation itself, through the OpenTelemetry API (imported only when it is installed).

Traces. Enqueue stores the current span's W3C trace context (``traceparent`` and ``tracestate``, never
baggage, which may carry user data) with the job. Each Attempt runs in a new trace, in a CONSUMER span named
``backwave.attempt <wire name>`` that *links* to the enqueuing span rather than being its child: a job runs
seconds or days after the request that enqueued it, maybe several times, so as a child it would stretch the
request's trace over all of that and make the request look as slow as its jobs; a link keeps both traces their
true length and still leads from one to the other (OpenTelemetry's messaging conventions link a "process" span
to the message's creation context for the same reason). The handler's own spans (database queries, HTTP calls)
are children of the Attempt span.

Metrics. Counters and histograms are recorded as things happen; the gauges read what :mod:`.gauges` keeps.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, ProxyTracerProvider, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import conf
from ..core import commands as cmd
from ..core import events as ev
from ..store.contract import MAX_TRACE_CONTEXT_BYTES
from . import gauges
from . import names as n

if TYPE_CHECKING:
    from ..context import JobContext
    from ..shell.runner import CommandRunner
    from ..shell.scope import AttemptResult

logger = logging.getLogger("backwave.telemetry")
_PROPAGATOR = TraceContextTextMapPropagator()  # W3C trace context only, whatever the global propagator is
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_TRACESTATE = re.compile(r"[ -~]{1,512}")  # W3C: at most 32 list members, 512 characters in all
_BASE = {n.MESSAGING_SYSTEM: n.SYSTEM}
#: The messaging conventions' advice for durations (seconds), stretched to the long jobs that queues hold.
_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
    *(30.0, 60.0, 300.0, 1800.0, 3600.0),
)

_tracer = trace.get_tracer(n.SCOPE)
_meter = metrics.get_meter(n.SCOPE)
_enqueued = _meter.create_counter(n.ENQUEUED, unit="{job}", description="Jobs enqueued.")
_claimed = _meter.create_counter(n.CLAIMED, unit="{job}", description="Jobs claimed by a Pump.")
_attempts = _meter.create_counter(n.ATTEMPTS, unit="{attempt}", description="Attempts ended, by outcome.")
_duration = _meter.create_histogram(
    n.ATTEMPT_DURATION,
    unit="s",
    description="How long each Attempt's handler ran.",
    explicit_bucket_boundaries_advisory=_BUCKETS,
)
_pickup = _meter.create_histogram(
    n.PICKUP_LATENCY,
    unit="s",
    description="From a job's due time to the start of its Attempt.",
    explicit_bucket_boundaries_advisory=_BUCKETS,
)
gauges.create(_meter)

# Whether a provider is set: before that the API's spans are no-ops and its measurements dropped, not worth
# building. A provider is set once per process and never unset, so a True is kept. Asking the API itself reads
# the environment each time; its module globals are read first, where this API version has them.
_provided = {"trace": False, "metrics": False}
_trace_globals = trace if hasattr(trace, "_TRACER_PROVIDER") else None
_metric_globals: Any = getattr(metrics, "_internal", None)
if not hasattr(_metric_globals, "_METER_PROVIDER"):
    _metric_globals = None


def _tracing() -> bool:
    if not _provided["trace"]:
        if _trace_globals is not None and _trace_globals._TRACER_PROVIDER is None:
            return False
        _provided["trace"] = not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)
    return _provided["trace"]


def _metering() -> bool:
    if not _provided["metrics"]:
        if _metric_globals is not None and _metric_globals._METER_PROVIDER is None:
            return False
        _provided["metrics"] = type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"
    return _provided["metrics"]


_reported: set[str] = set()


def failed(what: str) -> None:
    """Log a failure of the instrumentation itself, once per kind, with its traceback: telemetry never
    changes what happens to a job."""
    if what not in _reported:
        _reported.add(what)
        logger.warning("telemetry could not %s (logged once; jobs are unaffected)", what, exc_info=True)


# -- enqueue ---------------------------------------------------------------------------------------------


def trace_context() -> str:
    if not trace.get_current_span().get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return encode(carrier)


def encode(carrier: dict[str, str]) -> str:
    """The headers as stored: a well-formed ``traceparent`` and, if it fits, its ``tracestate``."""
    parent, state = carrier.get("traceparent", ""), carrier.get("tracestate", "")
    if not _TRACEPARENT.fullmatch(parent):
        return ""
    kept = {"traceparent": parent, **({"tracestate": state} if _TRACESTATE.fullmatch(state) else {})}
    text = json.dumps(kept, separators=(",", ":"))
    return text if len(text) <= MAX_TRACE_CONTEXT_BYTES else json.dumps({"traceparent": parent})


def links(stored: str) -> list[Link]:
    """A link to the span a job was enqueued in, from its stored trace context; none without a valid one."""
    if not stored:
        return []
    try:
        carrier = json.loads(stored)
        if not isinstance(carrier, dict):
            return []
        wanted = ("traceparent", "tracestate")
        headers = {k: v for k, v in carrier.items() if k in wanted and isinstance(v, str)}
        linked = trace.get_current_span(_PROPAGATOR.extract(headers)).get_span_context()
    except Exception:  # a row written by hand: no link, and the Attempt still runs
        return []
    return [Link(linked)] if linked.is_valid else []


def enqueued(queue: str, count: int) -> None:
    if _metering():
        _enqueued.add(count, {**_BASE, n.OPERATION_NAME: "enqueue", n.DESTINATION: queue})


# -- Attempts ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Handle:
    span: trace.Span | None  # None: no tracer provider
    token: object
    started: float
    queue: str
    metering: bool


def attempt_started(context: JobContext) -> Handle | None:
    tracing, metering = _tracing(), _metering()
    if not (tracing or metering):
        return None  # the API alone: nothing would be recorded
    if metering and context.due_at is not None:
        waited = max(0.0, time.time() - context.due_at.timestamp())
        _pickup.record(waited, {**_BASE, n.DESTINATION: context.queue})
    if not tracing:
        return Handle(span=None, token=None, started=time.perf_counter(), queue=context.queue, metering=True)
    attributes: dict[str, str | int] = {
        **_BASE,
        n.OPERATION_TYPE: "process",
        n.OPERATION_NAME: "attempt",
        n.DESTINATION: context.queue,
        n.MESSAGE_ID: str(context.job_id),
        n.CLIENT_ID: context.worker_id,
        n.WIRE_NAME: context.wire_name,
        n.ATTEMPT: context.attempt,
        n.MAX_ATTEMPTS: context.max_attempts,
    }
    span = _tracer.start_span(
        f"{n.ATTEMPT_SPAN} {context.wire_name}",
        context=otel_context.Context(),  # a trace of its own, whatever this thread ran before
        kind=SpanKind.CONSUMER,
        links=links(context.trace_context),
        attributes=attributes,
    )
    token = otel_context.attach(trace.set_span_in_context(span))
    started = time.perf_counter()
    return Handle(span=span, token=token, started=started, queue=context.queue, metering=metering)


def _record_exception(span: trace.Span, error: BaseException) -> None:
    """The exception as a span event; one whose ``str()`` or traceback cannot be rendered, by its type."""
    try:
        span.record_exception(error)
    except Exception:
        unprintable = {"exception.type": error_type(error), "exception.message": "<unprintable>"}
        span.add_event("exception", unprintable)


def error_type(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def attempt_finished(handle: Handle, result: AttemptResult) -> None:
    elapsed = time.perf_counter() - handle.started
    span, error = handle.span, result.error
    recorded = {**_BASE, n.OPERATION_NAME: "attempt", n.DESTINATION: handle.queue}
    if error is None:
        recorded[n.OUTCOME] = "succeeded"
    else:
        recorded.update({n.OUTCOME: "failed", n.ERROR_TYPE: error_type(error)})
    if span is not None:
        try:
            if error is not None:
                _record_exception(span, error)
                span.set_status(Status(StatusCode.ERROR, result.message))
            span.set_attributes(recorded)
            span.end()
        finally:
            otel_context.detach(handle.token)  # type: ignore[arg-type]  # the token attach() returned
    if handle.metering:
        _duration.record(elapsed, recorded)


# -- the Pump's store calls ------------------------------------------------------------------------------

_DEBUG_SPANS: dict[type[cmd.Command], tuple[str, str]] = {
    cmd.ClaimBatch: (n.CLAIM_SPAN, "receive"),
    cmd.ReportOutcomes: (n.REPORT_SPAN, "settle"),
    cmd.ExpireLeases: (n.SWEEP_SPAN, "settle"),
}


def obey(
    command: cmd.Command, runner: CommandRunner, run: Callable[[cmd.Command], Sequence[ev.Event]]
) -> Sequence[ev.Event]:
    metering = _metering()
    traced = _DEBUG_SPANS.get(type(command))
    if not metering and (traced is None or not _tracing()):
        return run(command)  # the API alone, or a command with nothing to trace
    if metering:
        gauges.watch(runner)
    if traced is None or not conf.get().debug_spans or not _tracing():
        events = run(command)
    else:
        name, operation = traced
        attributes = {
            **_BASE,
            n.OPERATION_TYPE: operation,
            n.OPERATION_NAME: name.removeprefix("backwave."),
            n.CLIENT_ID: runner.worker_id,
            n.CONSUMER_GROUP: runner.group,
        }
        with _tracer.start_as_current_span(
            name,
            context=otel_context.Context(),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,  # recorded below: the SDK's own rendering may raise on a hostile one
            set_status_on_exception=False,
        ) as span:
            try:
                events = run(command)
            except BaseException as exc:  # recorded on the span, and raised on to the runner as it was
                _record_exception(span, exc)
                span.set_status(Status(StatusCode.ERROR, error_type(exc)))
                raise
            span.set_attribute(n.BATCH_COUNT, _touched(command, events))
    if metering:
        try:
            _count(command, runner.group, events)
        except Exception:  # a broken metric must never look like a store fault to the runner
            failed("count a store reply")
    return events


def _touched(command: cmd.Command, events: Sequence[ev.Event]) -> int:
    for event in events:
        match event:
            case ev.ClaimCompleted(jobs=jobs):
                return len(jobs)
            case ev.OutcomesReported(applied=applied):
                return len(applied)
            case ev.LeasesExpired(count=count):
                return count
    return 0


def _count(command: cmd.Command, group: str, events: Sequence[ev.Event]) -> None:
    """The metrics a store reply carries: jobs claimed, and Attempts ended (reported or swept) by outcome."""
    for event in events:
        match command, event:
            case cmd.ClaimBatch(), ev.ClaimCompleted(jobs=jobs) if jobs:
                for queue, count in Counter(job.queue for job in jobs).items():
                    _claimed.add(
                        count,
                        {**_BASE, n.OPERATION_NAME: "claim", n.DESTINATION: queue, n.CONSUMER_GROUP: group},
                    )
            case cmd.ReportOutcomes(reports=reports), ev.OutcomesReported(applied=applied) if applied:
                kinds = Counter(r.kind.value for r in reports if r.job_id in applied)
                for kind, count in kinds.items():
                    _attempts.add(count, {**_BASE, n.OUTCOME: kind, n.CONSUMER_GROUP: group})
            case cmd.ExpireLeases(), ev.LeasesExpired(count=count) if count:
                _attempts.add(count, {**_BASE, n.OUTCOME: "expired", n.CONSUMER_GROUP: group})
