"""The SDK behind the API for the telemetry tests: one tracer provider and one meter provider for the whole
run (OpenTelemetry lets a process set each only once), with in-memory exporters each test starts empty."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the telemetry tests need opentelemetry-sdk (the test extra)")

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer: trace.Tracer

    def spans(self, prefix: str = "") -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def collect(self) -> dict[str, list[Any]]:
        """Every metric's data points since the last collection (counters and histograms are deltas)."""
        found: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


class Switch(Sampler):
    """Records spans only while a telemetry test runs: the tracer provider is global and stays set for the
    rest of the run (pytest-django runs tests in its own order), and other tests need not pay for spans."""

    on = False

    def should_sample(
        self, parent: Any, trace_id: int, name: str, kind: Any = None, attributes: Any = None, *rest: Any
    ) -> SamplingResult:
        if not self.on:
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)  # the span keeps the attributes it gave

    def get_description(self) -> str:
        return "Switch"


_SWITCH = Switch()
_SDK: Telemetry | None = None


def _install() -> Telemetry:
    global _SDK
    if _SDK is None:
        exporter = InMemorySpanExporter()
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        delta = {Counter: AggregationTemporality.DELTA, Histogram: AggregationTemporality.DELTA}
        reader = InMemoryMetricReader(preferred_temporality=delta)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _SDK = Telemetry(exporter, reader, trace.get_tracer("tests"))
    return _SDK


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    sdk = _install()
    sdk.exporter.clear()
    sdk.reader.get_metrics_data()  # start from zero
    _SWITCH.on = True
    yield sdk
    _SWITCH.on = False
    sdk.exporter.clear()
