"""Every path from a span to ``otel_traces`` rows gives the same rows, byte for byte, for generated spans.

A span becomes stored rows on several paths: the spool writer then the store's ingest, the direct ClickHouse
exporter, an OTLP request (protobuf or OTLP JSON, as case files carry it), and the replay engine storing and
building its replay from the spans it saw (``rows_from_spans``: rows written straight from the SDK's spans,
without the OTLP bytes). They all go through :mod:`otel_replay.exporting.rows`; these properties hold
them to it, with spans made by the real OTel SDK from generated names, kinds, statuses, attributes of every
type (sequences, big ints, NaN and infinities, bytes, odd and surrogate characters), events, links, remote
parents with trace state, resources and scopes. Rows are compared by ``repr`` so key order counts too.
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState
from property_budget import examples

from otel_replay.exporting.clickhouse import ClickHouseSpanExporter
from otel_replay.exporting.rows import (
    SELECT_COLUMNS,
    encode_request,
    record_from_query_row,
    record_from_row,
    records_from_request,
    records_from_spans,
    row_from_record,
    rows_from_request,
    rows_from_spans,
)
from otel_replay.exporting.spool import SpoolExporter
from otel_replay.otlp_json import from_otlp_json, to_otlp_json
from otel_replay.replay import storing
from otel_replay.storage.store import Store

# ------------------------------------------------------------------------------------------- strategies

ODD_TEXT = st.sampled_from(
    [
        "",
        " padded ",
        "café ☕",
        "\u2028 and \u2029",
        "<a href='x'>&amp;</a>",
        '["\\u003cb\\u003e"]',
        '{"k":"\\u0026"}',
        "tab\tnl\n\x00\x01\x7f",
        "lone \ud800 high",
        "\udfff",
        "\ud83d\ude00 a pair",
        "😀",
        "\\ud800 escaped",
        "中文",
        "\ufeffbom",
        "x" * 60,
    ]
)
TEXT = st.one_of(st.text(st.characters(exclude_categories=()), max_size=10), ODD_TEXT)
INT = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**80),
    st.integers(-(2**80), -(2**63) - 1),
    st.integers(0, 300),
)
FLOAT = st.floats(allow_nan=True, allow_infinity=True)
SCALAR = st.one_of(TEXT, st.booleans(), INT, FLOAT)
VALUE = st.one_of(
    SCALAR,
    st.binary(max_size=6),
    st.lists(TEXT, max_size=4),
    st.lists(st.booleans(), max_size=3),
    st.lists(INT, max_size=3),
    st.lists(FLOAT, max_size=3),
    st.lists(SCALAR, max_size=3),
)
ATTRS = st.dictionaries(TEXT, VALUE, max_size=5)
TIME = st.integers(946_684_800 * 10**9, 4_102_444_800 * 10**9)  # 2000 … 2100: where the store's time functions work
TRACE_STATES = st.sampled_from([TraceState(), TraceState([("vendor", "v1"), ("other", "x-y")])])

SPAN = st.fixed_dictionaries(
    {
        "name": TEXT,
        "kind": st.sampled_from(list(SpanKind)),
        "attributes": ATTRS,
        "events": st.lists(st.tuples(TEXT, ATTRS, TIME), max_size=3),
        "links": st.lists(
            st.tuples(st.integers(0, 2**128 - 1), st.integers(0, 2**64 - 1), st.booleans(), ATTRS), max_size=2
        ),
        "status": st.tuples(st.sampled_from(list(StatusCode)), TEXT),
        "parent": st.sampled_from(["none", "previous", "remote"]),
        "trace_state": TRACE_STATES,
        "resource": st.integers(0, 1),
        "scope": st.integers(0, 1),
        "start": TIME,
        "duration": st.integers(0, 10**12),
    }
)
RESOURCE = st.tuples(ATTRS, st.one_of(st.none(), TEXT), st.sampled_from(["", "https://opentelemetry.io/schemas/1"]))
SCOPE = st.tuples(TEXT, st.one_of(st.none(), TEXT), st.sampled_from([None, "https://x/schema"]), ATTRS)
EXAMPLE = st.fixed_dictionaries(
    {
        "spans": st.lists(SPAN, min_size=1, max_size=4),
        "resources": st.lists(RESOURCE, min_size=2, max_size=2),
        "scopes": st.lists(SCOPE, min_size=2, max_size=2),
        "trace_ids": st.lists(st.integers(1, 2**128 - 1), min_size=8, max_size=8, unique=True),
        "span_ids": st.lists(st.integers(1, 2**64 - 1), min_size=8, max_size=8, unique=True),
    }
)


class DrawnIds(IdGenerator):
    """Ids from the example, so the spans (and their rows) are the same every run."""

    def __init__(self, trace_ids: Sequence[int], span_ids: Sequence[int]) -> None:
        self.traces: Iterator[int] = iter(trace_ids)
        self.spans: Iterator[int] = iter(span_ids)

    def generate_trace_id(self) -> int:
        return next(self.traces)

    def generate_span_id(self) -> int:
        return next(self.spans)


def make_spans(example: dict[str, Any]) -> list[ReadableSpan]:
    """Finished spans made by the real SDK from a generated example."""
    ids = DrawnIds(example["trace_ids"], example["span_ids"])
    memory = InMemorySpanExporter()
    providers = []
    for attributes, service, schema_url in example["resources"]:
        attributes = {**attributes, **({"service.name": service} if service is not None else {})}
        provider = TracerProvider(resource=Resource(attributes, schema_url), id_generator=ids)
        provider.add_span_processor(SimpleSpanProcessor(memory))
        providers.append(provider)
    previous: Any = None
    for spec in example["spans"]:
        name, version, schema_url, scope_attributes = example["scopes"][spec["scope"]]
        tracer = providers[spec["resource"]].get_tracer(name, version, schema_url, scope_attributes)
        context = None
        if spec["parent"] == "previous" and previous is not None:
            context = trace.set_span_in_context(previous)
        elif spec["parent"] == "remote":
            remote = SpanContext(
                next(ids.traces),
                next(ids.spans),
                is_remote=True,
                trace_flags=TraceFlags(1),
                trace_state=spec["trace_state"],
            )
            context = trace.set_span_in_context(NonRecordingSpan(remote))
        links = [
            Link(SpanContext(t, s, is_remote=remote_link), attributes)
            for t, s, remote_link, attributes in spec["links"]
        ]
        span = tracer.start_span(
            spec["name"],
            context=context,
            kind=spec["kind"],
            attributes=spec["attributes"],
            links=links,
            start_time=spec["start"],
        )
        for event_name, attributes, at in spec["events"]:
            span.add_event(event_name, attributes, timestamp=at)
        code, message = spec["status"]
        span.set_status(Status(code, message if code is StatusCode.ERROR else None))
        span.end(end_time=spec["start"] + spec["duration"])
        previous = span
    return list(memory.get_finished_spans())


def has_surrogate(text: str | None) -> bool:
    return text is not None and any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def sdk_refuses(spans: Sequence[ReadableSpan]) -> bool:
    """True when a span's own text (not an attribute) holds a lone surrogate: the SDK's encoder then fails the
    whole batch, where the project's encoder keeps the span with U+FFFD."""
    for span in spans:
        scope = span.instrumentation_scope
        texts = [
            span.name,
            span.status.description,
            *(e.name for e in span.events),
            ",".join(f"{k}={v}" for k, v in span.context.trace_state.items()) if span.context else "",
            *((scope.name, scope.version, scope.schema_url) if scope else ()),
            span.resource.schema_url,
        ]
        if any(has_surrogate(t) for t in texts):
            return True
    return False


def by_id(rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    return sorted(rows, key=lambda row: (row[1], row[2]))


class StoreClient:
    """The store's own clickhouse-connect client, lent to the direct exporter (which closes what it is given)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def insert(self, table: str, rows: list[Any], **options: Any) -> Any:
        return self.store.client.insert(table, rows, **options)

    def close(self) -> None:
        pass  # the store outlives the exporter


class CapturingClient:
    """A clickhouse-connect client stand-in that keeps what the direct exporter inserts."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    def insert(self, table: str, rows: list[Any], **_: Any) -> None:
        self.rows.extend(rows)

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------- paths without the store


@pytest.fixture(autouse=True, scope="module")
def quiet_encoders() -> Iterator[None]:
    """The generated values make both encoders log every attribute they drop: keep that out of the output."""
    loggers = [logging.getLogger(name) for name in ("opentelemetry", "otel_replay")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    yield
    for logger, level in zip(loggers, levels):
        logger.setLevel(level)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(example=EXAMPLE)
def test_every_path_gives_the_encoders_rows_byte_for_byte(example: dict[str, Any], tmp_path_factory: Any) -> None:
    spans = make_spans(example)
    rows = rows_from_spans(spans)  # written straight from the SDK's spans, without OTLP bytes in between
    assert len(rows) == len(spans)

    # The spool's record payload, and the OTLP request as a protobuf message (what an OTLP receiver holds):
    # the bytes' path gives the rows the direct walk gave.
    payload = encode_request(spans)
    assert repr(rows_from_request(payload)) == repr(rows)
    assert repr(rows_from_request(ExportTraceServiceRequest.FromString(payload))) == repr(rows)

    # The SDK's own OTLP encoder (what the OTLP exporter sends a Collector) gives the same bytes, unless a span's
    # own text holds a lone surrogate, which fails its whole batch: then the encoder's rows carry U+FFFD.
    try:
        sdk_payload = encode_spans(spans).SerializeToString()
    except (UnicodeEncodeError, ValueError):
        assert sdk_refuses(spans)
        assert not any(has_surrogate(row[5]) or has_surrogate(row[14]) for row in rows)
    else:
        assert payload == sdk_payload
        assert repr(rows_from_request(sdk_payload)) == repr(rows)

    # The direct ClickHouse exporter inserts exactly these rows.
    client = CapturingClient()
    exporter = ClickHouseSpanExporter(client_factory=lambda: client, home=tmp_path_factory.mktemp("direct"))
    assert exporter.export(spans).name == "SUCCESS"
    exporter.shutdown()
    assert repr(client.rows) == repr(rows)

    # Records: as inserted, as the store reads them, as the replay engine builds them; rows → records → rows.
    records = [record_from_row(row) for row in rows]
    assert records_from_spans(spans) == records
    assert records_from_request(payload) == records
    assert all(repr(row_from_record(record)) == repr(row) for record, row in zip(records, rows))
    stored = sorted((record_from_query_row(row) for row in rows), key=lambda r: (r.timestamp_ns, r.span_id))
    assert storing.stored_records(spans) == stored

    # OTLP JSON (case files): records → JSON text → records, and the protobuf JSON form of the request.
    doc = json.loads(json.dumps(to_otlp_json(records)))
    assert sorted(from_otlp_json(doc), key=repr) == sorted(records, key=repr)
    reparsed = json_format.Parse(
        json_format.MessageToJson(ExportTraceServiceRequest.FromString(payload)), ExportTraceServiceRequest()
    )
    assert repr(rows_from_request(reparsed)) == repr(rows)


class IntKind(enum.IntEnum):
    A = 7


class TextKind(str, enum.Enum):
    X = "x-value"


class LoudText(str):
    def __repr__(self) -> str:
        return "LoudText(...)"


class Opaque:
    """A value OTLP cannot carry."""


# What a span handed to the encoder may hold that the SDK's own attribute cleaning never lets through (a span
# built by another processor, an exporter's caller): mappings, nested sequences, subclasses, keys of other types.
LEAF = st.one_of(
    SCALAR,
    st.none(),
    st.binary(max_size=4),
    st.sampled_from([IntKind.A, TextKind.X, LoudText("loud"), bytearray(b"ab"), Opaque(), True]),
)
ANY_VALUE = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(TEXT, st.integers(0, 2), st.just(TextKind.X)), inner, max_size=3),
    ),
    max_leaves=8,
)
ANY_ATTRS = st.dictionaries(st.one_of(TEXT, st.just(LoudText("key")), st.integers(0, 2)), ANY_VALUE, max_size=5)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    attributes=ANY_ATTRS,
    event_attributes=ANY_ATTRS,
    name=TEXT,
    ids=st.tuples(st.integers(0, 2**128 - 1), st.integers(0, 2**64 - 1)),
)
def test_spans_straight_to_rows_equal_their_bytes_for_any_attribute_value(
    attributes: dict[Any, Any], event_attributes: dict[Any, Any], name: str, ids: tuple[int, int]
) -> None:
    context = SpanContext(ids[0], ids[1], is_remote=False)
    span = ReadableSpan(
        name=name,
        context=context,
        resource=Resource({"service.name": "any-values"}),
        attributes=attributes,
        events=[Event(name, event_attributes, timestamp=5)],
        links=[Link(context, event_attributes)],
        kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, name),
        start_time=10,
        end_time=3,  # ends before it starts: the duration wraps as a 64-bit number on both paths
        instrumentation_scope=InstrumentationScope(name, name),
    )
    assert repr(rows_from_spans([span])) == repr(rows_from_request(encode_request([span])))


# ------------------------------------------------------------------------------------------- the store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    home = tmp_path_factory.mktemp("row-encoder-home")
    opened = Store.open(f"chdb://{home / 'store'}", home=home, ingest=False)
    try:
        yield opened
    finally:
        opened.close()


def stored_rows(store: Store) -> list[Sequence[Any]]:
    result = store.client.query(f"SELECT {SELECT_COLUMNS} FROM {store.traces_table} ORDER BY TraceId, SpanId")
    return [tuple(row) for row in result.result_rows]


def empty(store: Store) -> None:
    for table in (store.traces_table, store.lookup_table):
        store.client.command(f"TRUNCATE TABLE {table}")


@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(example=EXAMPLE)
def test_the_store_holds_the_encoders_rows_whichever_path_wrote_them(example: dict[str, Any], store: Store) -> None:
    spans = make_spans(example)
    expected = repr(by_id(rows_from_spans(spans)))
    table = store.traces_table.replace("`", "")

    # SDK spans → spool segment → ingest → rows in the store.
    empty(store)
    spool = SpoolExporter(Path(store.home) / "spool")
    assert spool.export(spans).name == "SUCCESS"
    spool.shutdown()
    report = store.ingest()
    assert report.spans == len(spans) and not report.problems
    assert repr(stored_rows(store)) == expected

    # The replay engine's records of the spans it saw are what the store reads back, trace by trace.
    built = storing.stored_records(spans)
    assert built is not None
    for trace_id in {row[1] for row in rows_from_spans(spans)}:
        assert store.load_spans(trace_id) == [r for r in built if r.trace_id == trace_id]

    # SDK spans → the direct ClickHouse exporter → rows in the store.
    empty(store)
    exporter = ClickHouseSpanExporter(
        client_factory=lambda: StoreClient(store), table=table, spool_directory=Path(store.home) / "direct-spool"
    )
    assert exporter.export(spans).name == "SUCCESS"
    exporter.shutdown()
    assert repr(stored_rows(store)) == expected
