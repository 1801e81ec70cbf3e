"""A span exporter for worker subprocesses the telemetry tests start: one JSON line per finished span, with
what the tests assert on (names, ids, links, attributes, status), appended to a file."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

#: The environment variable that names the file; tests/apps.py installs the exporter when it is set.
SPANS_FILE = "BACKWAVE_TEST_SPANS_FILE"


def as_record(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        "links": [
            {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
            for link in span.links
        ],
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "events": [event.name for event in span.events],
    }


class FileSpanExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(as_record(span), default=str) + "\n" for span in spans)
        with self._lock, open(self.path, "a") as out:
            out.write(lines)
        return SpanExportResult.SUCCESS


def install_from_environment() -> None:
    """In a worker subprocess: a tracer provider exporting every span to the file the test named."""
    path = os.environ.get(SPANS_FILE)
    if not path:
        return
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    trace.set_tracer_provider(provider)
