"""OTLP → otel_traces row mapping: one test per exporter value rule, plus the reader's tolerance."""

from __future__ import annotations

import math

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from otel_replay.exporting.rows import (
    INSERT_COLUMNS,
    any_value_to_string,
    format_double,
    record_from_query_row,
    record_from_row,
    records_from_request,
    row_from_record,
    rows_from_request,
    unescape_html_json,
)


def kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def arr(*values: AnyValue) -> AnyValue:
    return AnyValue(array_value=ArrayValue(values=list(values)))


def kvlist(*pairs: tuple[str, AnyValue]) -> AnyValue:
    return AnyValue(kvlist_value=KeyValueList(values=[kv(k, v) for k, v in pairs]))


S = lambda s: AnyValue(string_value=s)  # noqa: E731
I = lambda i: AnyValue(int_value=i)  # noqa: E731,E741
D = lambda d: AnyValue(double_value=d)  # noqa: E731
B = lambda b: AnyValue(bool_value=b)  # noqa: E731


def request(*spans: Span, resource: list[KeyValue] | None = None, scope: tuple[str, str] = ("lib", "1.2")) -> bytes:
    rs = ResourceSpans()
    rs.resource.attributes.extend(resource or [])
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = scope
    ss.spans.extend(spans)
    return ExportTraceServiceRequest(resource_spans=[rs]).SerializeToString()


def span(**fields) -> Span:
    base = dict(
        trace_id=bytes.fromhex("0af7651916cd43dd8448eb211c80319c"),
        span_id=bytes.fromhex("b7ad6b7169203331"),
        name="op",
        start_time_unix_nano=1_700_000_000_123_456_789,
        end_time_unix_nano=1_700_000_001_000_000_000,
    )
    base.update(fields)
    return Span(**base)


def test_string_value_is_stored_as_is():
    assert any_value_to_string(S('he said "hi" <&>')) == 'he said "hi" <&>'


def test_bool_value_is_true_or_false():
    assert any_value_to_string(B(True)) == "true"
    assert any_value_to_string(B(False)) == "false"


def test_int_value_is_decimal():
    assert any_value_to_string(I(-9223372036854775808)) == "-9223372036854775808"
    assert any_value_to_string(I(42)) == "42"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.5, "0.5"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1e20, "100000000000000000000"),
        (1e-6, "0.000001"),
        (1.5e-7, "1.5e-7"),
        (-0.0, "-0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
        (123456.789, "123456.789"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_double_value_uses_go_shortest_es6_form(value, text):
    assert format_double(value) == text
    assert any_value_to_string(D(value)) == text


def test_bytes_value_is_standard_base64_with_padding():
    assert any_value_to_string(AnyValue(bytes_value=b"\xfb\xff\x01")) == "+/8B"
    assert any_value_to_string(AnyValue(bytes_value=b"ab")) == "YWI="


def test_array_value_is_compact_json():
    assert any_value_to_string(arr(I(1), I(2))) == "[1,2]"
    assert any_value_to_string(arr(S("a"), S("b"))) == '["a","b"]'
    assert any_value_to_string(arr(D(1.0), B(True), S("x"), AnyValue(), arr())) == '[1,true,"x",null,[]]'


def test_kvlist_value_is_compact_json_with_sorted_keys():
    assert (
        any_value_to_string(kvlist(("b", I(1)), ("a", kvlist(("z", S("z")), ("y", D(0.5))))))
        == '{"a":{"y":0.5,"z":"z"},"b":1}'
    )


def test_json_escaping_is_go_without_html_escaping():
    text = any_value_to_string(arr(S('<a href="x">&</a>'), S("tab\tnl\n\x01\u2028é\\")))
    assert text == '["<a href=\\"x\\">&</a>","tab\\tnl\\n\\u0001\\u2028é\\\\"]'


def test_json_with_nan_is_empty_like_go_marshal_failure():
    assert any_value_to_string(arr(D(math.nan))) == ""


def test_bytes_inside_array_are_base64_strings():
    assert any_value_to_string(arr(AnyValue(bytes_value=b"ab"))) == '["YWI="]'


def test_empty_value_is_empty_string():
    assert any_value_to_string(AnyValue()) == ""


def test_ids_are_lowercase_hex_and_all_zero_parent_is_empty():
    (row,) = rows_from_request(request(span(parent_span_id=b"\0" * 8)))
    assert row[1] == "0af7651916cd43dd8448eb211c80319c"
    assert row[2] == "b7ad6b7169203331"
    assert row[3] == ""
    (row,) = rows_from_request(request(span(parent_span_id=bytes.fromhex("00F067AA0BA902B7"))))
    assert row[3] == "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("kind", "name"),
    [(0, "Unspecified"), (1, "Internal"), (2, "Server"), (3, "Client"), (4, "Producer"), (5, "Consumer")],
)
def test_span_kind_names(kind, name):
    (row,) = rows_from_request(request(span(kind=kind)))
    assert row[6] == name


@pytest.mark.parametrize(("code", "name"), [(0, "Unset"), (1, "Ok"), (2, "Error")])
def test_status_code_names_and_message(code, name):
    (record,) = records_from_request(request(span(status=Status(code=code, message="boom"))))
    assert record.status_code == name
    assert record.status_message == "boom"


def test_service_name_from_resource_and_empty_when_absent():
    (with_name,) = records_from_request(request(span(), resource=[kv("service.name", S("svc"))]))
    (without,) = records_from_request(request(span()))
    assert with_name.service_name == "svc"
    assert with_name.resource_attributes == {"service.name": "svc"}
    assert without.service_name == ""


def test_maps_have_sorted_keys_and_last_duplicate_wins():
    (row,) = rows_from_request(
        request(span(attributes=[kv("zeta", I(1)), kv("alpha", S("a")), kv("mid", B(True)), kv("alpha", S("again"))]))
    )
    attributes = row[INSERT_COLUMNS.index("SpanAttributes")]
    assert list(attributes.items()) == [("alpha", "again"), ("mid", "true"), ("zeta", "1")]


def test_events_and_links_keep_their_order():
    events = [
        Span.Event(time_unix_nano=3, name="c", attributes=[kv("k", I(3))]),
        Span.Event(time_unix_nano=1, name="a"),
        Span.Event(time_unix_nano=2, name="b"),
    ]
    links = [
        Span.Link(
            trace_id=bytes.fromhex("11" * 16),
            span_id=bytes.fromhex("22" * 8),
            trace_state="x=1",
            attributes=[kv("n", D(2.5))],
        ),
        Span.Link(trace_id=bytes.fromhex("33" * 16), span_id=bytes.fromhex("44" * 8)),
    ]
    (record,) = records_from_request(request(span(events=events, links=links)))
    assert [(e.timestamp_ns, e.name, e.attributes) for e in record.events] == [
        (3, "c", {"k": "3"}),
        (1, "a", {}),
        (2, "b", {}),
    ]
    assert [(x.trace_id, x.span_id, x.trace_state, x.attributes) for x in record.links] == [
        ("11" * 16, "22" * 8, "x=1", {"n": "2.5"}),
        ("33" * 16, "44" * 8, "", {}),
    ]


def test_times_scope_trace_state_and_duration():
    (record,) = records_from_request(request(span(trace_state="k=v"), scope=("my.lib", "9.9")))
    assert record.timestamp_ns == 1_700_000_000_123_456_789
    assert record.duration_ns == 876_543_211
    assert (record.scope_name, record.scope_version, record.trace_state) == ("my.lib", "9.9", "k=v")


def test_rows_have_the_22_exporter_columns_in_order():
    assert INSERT_COLUMNS[0] == "Timestamp" and INSERT_COLUMNS[-1] == "Links.Attributes"
    assert len(INSERT_COLUMNS) == 22
    (row,) = rows_from_request(request(span()))
    assert len(row) == 22
    assert row_from_record(record_from_row(row)) == row


def test_reader_accepts_old_spellings_and_html_escaped_json():
    (row,) = rows_from_request(request(span(kind=2, status=Status(code=2))))
    old = list(row)
    old[6], old[13] = "SPAN_KIND_SERVER", "STATUS_CODE_ERROR"
    old[11] = {"a": '["\\u003cb\\u003e \\u0026"]', "b": "plain \\u003c text", "c": '["\\\\u003c"]'}
    record = record_from_query_row(old)
    assert record.span_kind == "Server"
    assert record.status_code == "Error" and record.is_error
    assert record.span_attributes == {"a": '["<b> &"]', "b": "plain \\u003c text", "c": '["\\\\u003c"]'}
    assert unescape_html_json('{"k":"\\u0026"}') == '{"k":"&"}'


def test_real_sdk_spans_map_like_the_exporter():
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scope", "0.1")
    with (
        tracer.start_as_current_span("invoke_agent a", attributes={"f": 2.0, "l": [1, 2], "b": False}) as root,
        tracer.start_as_current_span("execute_tool t"),
    ):
        pass
    provider.shutdown()
    records = {r.span_name: r for r in records_from_request(encode_spans(memory.get_finished_spans()))}
    parent = records["invoke_agent a"]
    assert parent.span_attributes == {"b": "false", "f": "2", "l": "[1,2]"}
    assert parent.parent_span_id == "" and parent.service_name == "agent" and parent.span_kind == "Internal"
    assert records["execute_tool t"].parent_span_id == format(root.get_span_context().span_id, "016x")
