"""The spool's own OTLP writer gives exactly the bytes of the SDK's encoder, for any span the SDK can make.

The spool writes ``ExportTraceServiceRequest`` bytes itself (the SDK's encoder was the largest cost of
recording). Everything downstream (ingest, the Collector, any OTLP reader) must see the same message, so the
property is byte equality with ``encode_spans(spans).SerializeToString()``, including the values the writer
hands back to the SDK's encoder (ints past int64, lone surrogates, bytes).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_replay.exporting.spool import encode_request

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SCALAR = st.one_of(st.text(max_size=30), st.booleans(), INT64, st.floats(allow_nan=True, allow_infinity=True))
VALUE = st.one_of(SCALAR, st.lists(st.text(max_size=8), max_size=4), st.lists(INT64, max_size=4),
                  st.lists(st.floats(), max_size=3), st.lists(st.booleans(), max_size=3))
ODD = st.one_of(st.integers(min_value=2**63, max_value=2**70), st.just("lone \ud800 surrogate"),
                st.binary(max_size=8), st.lists(st.one_of(st.text(max_size=3), INT64), max_size=3))
ATTRS = st.dictionaries(st.text(min_size=1, max_size=12), VALUE, max_size=8)
ODD_ATTRS = st.dictionaries(st.text(min_size=1, max_size=12), st.one_of(VALUE, ODD), max_size=6)
SPAN = st.fixed_dictionaries({
    "name": st.text(max_size=20),
    "kind": st.sampled_from(list(SpanKind)),
    "attributes": ATTRS,
    "events": st.lists(st.tuples(st.text(max_size=12), ATTRS), max_size=3),
    "status": st.tuples(st.sampled_from(list(StatusCode)), st.text(max_size=12)),
    "child": st.booleans(),
    "link": st.booleans(),
    "scope": st.sampled_from([("otel_replay", "0.1.0"), ("other.lib", ""), ("", "")]),
})


def record(specs: list[dict[str, Any]], resources: list[dict[str, Any]]) -> list[Any]:
    """Spans made by the real SDK from the specs, under one provider per resource."""
    exporter = InMemorySpanExporter()
    previous = None
    for i, spec in enumerate(specs):
        provider = TracerProvider(resource=Resource.create(resources[i % len(resources)]))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer(*spec["scope"])
        links = [Link(previous.get_span_context(), {"why": "before"})] if spec["link"] and previous else []
        parent = previous if spec["child"] and previous is not None else None
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        span = tracer.start_span(spec["name"], context=context, kind=spec["kind"], attributes=spec["attributes"],
                                 links=links)
        for name, attributes in spec["events"]:
            span.add_event(name, attributes)
        code, message = spec["status"]
        span.set_status(Status(code, message if code is StatusCode.ERROR else None))
        span.end()
        previous = span
    return list(exporter.get_finished_spans())


RESOURCES = st.lists(st.dictionaries(st.text(min_size=1, max_size=10), SCALAR, max_size=3), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(specs=st.lists(SPAN, min_size=1, max_size=6), resources=RESOURCES)
def test_the_spool_writer_gives_the_sdk_encoders_bytes(specs: list[dict[str, Any]],
                                                        resources: list[dict[str, Any]]) -> None:
    spans = record(specs, resources)
    assert encode_request(spans) == encode_spans(spans).SerializeToString()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(attributes=ODD_ATTRS)
def test_values_the_writer_hands_back_still_give_the_sdk_encoders_bytes(attributes: dict[str, Any]) -> None:
    spec = {"name": "odd", "kind": SpanKind.INTERNAL, "attributes": attributes, "events": [("e", attributes)],
            "status": (StatusCode.UNSET, ""), "child": False, "link": False, "scope": ("otel_replay", "1")}
    spans = record([spec], [{"service.name": "odd"}])
    assert encode_request(spans) == encode_spans(spans).SerializeToString()
