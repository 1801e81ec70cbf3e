"""Traces: enqueue records the trace context it runs in, and each Attempt runs in a span linked to it."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from backwave_django.models import Job
from backwave_django.telemetry import _otel

from .. import jobs
from ..shell.helpers import group, running, wait_until

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def stored(job_id: int) -> dict[str, str]:
    return json.loads(Job.objects.get(id=job_id).trace_context)


@pytest.mark.django_db
def test_an_enqueue_inside_a_span_stores_its_w3c_trace_context(otel):
    with otel.tracer.start_as_current_span("request") as span:
        job = jobs.noop.enqueue()
    context = span.get_span_context()
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    assert stored(job.id)["traceparent"] == expected
    assert job.trace_context == Job.objects.get(id=job.id).trace_context


@pytest.mark.django_db
def test_a_batch_enqueue_gives_every_job_the_same_context(otel):
    with otel.tracer.start_as_current_span("request"):
        created = jobs.noop.enqueue_many([{}] * 3)
    assert len({Job.objects.get(id=job.id).trace_context for job in created}) == 1


@pytest.mark.django_db
def test_an_enqueue_outside_any_span_stores_nothing(otel):
    assert Job.objects.get(id=jobs.noop.enqueue().id).trace_context == ""


@pytest.mark.django_db
def test_a_request_span_around_a_django_view_is_the_one_stored(otel, client, settings):
    settings.ROOT_URLCONF = "tests.telemetry.urls"
    with otel.tracer.start_as_current_span("GET /signup/") as span:
        response = client.get("/signup/")
    assert response.status_code == 200
    assert f"{span.get_span_context().span_id:016x}" in stored(response.json()["job"])["traceparent"]


def test_the_stored_context_keeps_a_valid_tracestate_and_drops_a_malformed_one():
    good = _otel.encode({"traceparent": TRACEPARENT, "tracestate": "vendor=abc"})
    assert json.loads(good) == {"traceparent": TRACEPARENT, "tracestate": "vendor=abc"}
    assert json.loads(_otel.encode({"traceparent": TRACEPARENT, "tracestate": "x\n"})) == {
        "traceparent": TRACEPARENT
    }
    assert _otel.encode({"traceparent": "garbage"}) == ""
    assert _otel.encode({"baggage": "user=alice"}) == ""


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[]", '{"traceparent": 5}', '{"traceparent": "00-zz"}', "{" * 10_000, '"\\ud800"'],
)
def test_a_stored_context_that_is_not_one_gives_no_link(text):
    assert _otel.links(text) == []


def test_a_stored_context_gives_a_link_to_its_span():
    [link] = _otel.links(json.dumps({"traceparent": TRACEPARENT}))
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_attempt_runs_in_a_consumer_span_linked_to_the_enqueuing_span(otel, settings):
    with otel.tracer.start_as_current_span("request") as request:
        job = jobs.noop.enqueue()
    with running(settings, {"g": group(POOL_SIZE=2)}):
        wait_until(lambda: otel.spans("backwave.attempt"), timeout=10)
    [span] = otel.spans("backwave.attempt")
    assert span.name == "backwave.attempt tests.noop"
    assert span.kind is SpanKind.CONSUMER
    assert span.parent is None  # a trace of its own ...
    [link] = span.links  # ... linked to the request's
    assert link.context.span_id == request.get_span_context().span_id
    assert link.context.trace_id == request.get_span_context().trace_id
    attributes = dict(span.attributes or {})
    assert attributes["messaging.system"] == "backwave"
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.destination.name"] == "default"
    assert attributes["messaging.message.id"] == str(job.id)
    assert attributes["messaging.client.id"].split(":")[2] == "g"
    assert attributes["backwave.job.wire_name"] == "tests.noop"
    assert attributes["backwave.job.attempt"] == 1
    assert attributes["backwave.outcome"] == "succeeded"
    assert span.status.status_code is StatusCode.UNSET


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_failed_attempt_records_the_exception_and_an_error_status(otel, settings):
    jobs.always_fails.enqueue()
    with running(settings, {"g": group()}):
        wait_until(lambda: len(otel.spans("backwave.attempt")) == 2, timeout=10)
    for number, span in enumerate(sorted(otel.spans("backwave.attempt"), key=lambda s: s.start_time), 1):
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["backwave.job.attempt"] == number
        assert dict(span.attributes or {})["backwave.outcome"] == "failed"
        assert dict(span.attributes or {})["error.type"] == "ValueError"
        [event] = span.events
        assert event.name == "exception"
        assert span.links == ()  # enqueued outside any span


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_exception_that_cannot_be_rendered_is_recorded_by_its_type_and_changes_no_outcome(otel, settings):
    job = jobs.unprintable.enqueue()
    with running(settings, {"g": group()}):
        wait_until(lambda: Job.objects.get(id=job.id).state == "dead_lettered", timeout=20)
    assert Job.objects.get(id=job.id).terminal_cause.startswith("UnprintableError")
    [first, _] = otel.spans("backwave.attempt")
    [event] = first.events
    assert dict(event.attributes or {})["exception.type"] == "tests.jobs.UnprintableError"
    assert first.status.status_code is StatusCode.ERROR


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_handlers_own_spans_are_children_of_its_attempt_span(otel, settings):
    jobs.opens_a_span.enqueue(name="inside")
    with running(settings, {"g": group()}):
        wait_until(lambda: otel.spans("inside"), timeout=10)
    [attempt], [inside] = otel.spans("backwave.attempt"), otel.spans("inside")
    assert inside.parent is not None and inside.parent.span_id == attempt.get_span_context().span_id


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("debug", [False, True])
def test_claims_reports_and_sweeps_get_spans_only_with_debug_spans(otel, settings, debug):
    jobs.noop.enqueue_many([{}] * 3)
    with running(settings, {"g": group()}, more={"DEBUG_SPANS": debug}) as node:
        wait_until(lambda: len(otel.spans("backwave.attempt")) == 3, timeout=10)
        wait_until(lambda: node.pumps[0].processed == 3, timeout=10)
    store_spans = {span.name for span in otel.spans()} & {
        "backwave.claim",
        "backwave.report",
        "backwave.sweep",
    }
    assert store_spans == ({"backwave.claim", "backwave.report", "backwave.sweep"} if debug else set())
    claims = [dict(span.attributes or {}) for span in otel.spans("backwave.claim")]
    assert sum(attributes["messaging.batch.message_count"] for attributes in claims) == (3 if debug else 0)
    assert all(span.kind is SpanKind.CLIENT and span.parent is None for span in otel.spans("backwave.claim"))
