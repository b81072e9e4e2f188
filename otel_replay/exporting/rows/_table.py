"""OTLP protobuf spans ↔ rows of the Collector exporter's ``otel_traces`` table (the half of :mod:`.rows`
that maps an OTLP message to rows, and rows back to :class:`~otel_replay.records.SpanRecord`).

Why it exists: a trace written by the OpenTelemetry Collector's ``clickhouseexporter`` and a trace written by
otel-replay's own Python path (spool ingest, the direct exporter, the replay engine, case files) must be
byte-for-byte the same rows, so every reader (the replay engine, the CLI, Grafana) sees both alike.

Value rules (the Collector's ``pcommon.Value.AsString``; see ``docs/storage.md``):

* string as is; bool ``true``/``false``; int in decimal; double in Go's shortest ES6/JSON form
  (``1``, ``0.5``, ``1e+21``, ``1e-7``, ``NaN``, ``Infinity``, ``-Infinity``); bytes in standard base64;
  arrays and kvlists as compact JSON with sorted keys and Go ``encoding/json`` escaping without HTML escaping
  (an array or kvlist holding NaN or ±Inf cannot be JSON and stores ``''``, as Go's marshaller fails); an
  empty value is ``''``.
* ids are lowercase hex; an all-zero (or absent) id is ``''``. An id of another length than OTLP's (16 bytes
  for a trace, 8 for a span) makes the whole request a ``ValueError``, as the Collector refuses it. Span kinds
  are ``Unspecified``, ``Internal``, ``Server``, ``Client``, ``Producer``, ``Consumer``; status codes
  ``Unset``, ``Ok``, ``Error``.
* times are nanoseconds as Go's ``int64(ts)`` reads them: an unsigned time of 2^63 or more (after the year
  2262) wraps to a negative number, as the Collector stores it (``DateTime64(9)`` holds an Int64).
* array and kvlist values of any depth are written out (no recursion limit).
* ``ServiceName`` is the resource's ``service.name`` (``''`` if absent); maps are stored with sorted keys;
  events and links keep their order; ``Duration`` is end − start as an unsigned 64-bit number.

Readers (:func:`record_from_query_row`) also accept what older Collectors wrote: ``SPAN_KIND_*`` /
``STATUS_CODE_*`` spellings are normalised to the current ones, and JSON values HTML-escaped by Collectors
before v0.152 (``\\u003c``, ``\\u003e``, ``\\u0026``) are unescaped.

Process-wide state: one bounded cache (a map's keys as read → whether they are sorted already), which only ever
holds what it computed from its own key and is cleared when full. This module must never do I/O, never reorder
events or links, and never guess a type for a stored string.
It sits on the ingest hot path, so it avoids JSON (except for array/kvlist values) and per-value allocations.
"""

from __future__ import annotations

import base64
import json.encoder
import math
import re
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

from ...records import EventRecord, LinkRecord, SpanRecord

INSERT_COLUMNS: Final[tuple[str, ...]] = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
)
"""The 22 columns the exporter inserts, in its order; a row tuple from this module has exactly these fields."""

_MAP: Final = "Map(LowCardinality(String), String)"
INSERT_COLUMN_TYPES: Final[tuple[str, ...]] = (
    "DateTime64(9)",
    "String",
    "String",
    "String",
    "String",
    "LowCardinality(String)",
    "LowCardinality(String)",
    "LowCardinality(String)",
    _MAP,
    "String",
    "String",
    _MAP,
    "UInt64",
    "LowCardinality(String)",
    "String",
    "Array(DateTime64(9))",
    "Array(LowCardinality(String))",
    f"Array({_MAP})",
    "Array(String)",
    "Array(String)",
    "Array(String)",
    f"Array({_MAP})",
)
"""ClickHouse types of :data:`INSERT_COLUMNS`, so an insert needs no ``DESCRIBE`` round trip."""

SELECT_COLUMNS: Final[str] = (
    "toUnixTimestamp64Nano(Timestamp), TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, "
    "ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, "
    "StatusMessage, arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp), Events.Name, Events.Attributes, "
    "Links.TraceId, Links.SpanId, Links.TraceState, Links.Attributes"
)
"""Select list whose result rows :func:`record_from_query_row` reads (times as integer nanoseconds)."""

_SPAN_KINDS: Final = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUS_CODES: Final = ("Unset", "Ok", "Error")
_OLD_SPELLINGS: Final[dict[str, str]] = {
    **{f"SPAN_KIND_{k.upper()}": k for k in _SPAN_KINDS},
    **{f"STATUS_CODE_{c.upper()}": c for c in _STATUS_CODES},
}
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16
_U64: Final = (1 << 64) - 1
_I64_MAX: Final = (1 << 63) - 1
_WRAP: Final = 1 << 64
_SERVICE_NAME: Final = "service.name"
_by_key = itemgetter(0)
encode_json_string = json.encoder.encode_basestring  # escapes like Go (", \\, control chars), leaves UTF-8


# ------------------------------------------------------------------------------------------------ values


def _expand_exponent(text: str) -> str:
    """Python's ``repr`` exponent form (``1e-05``, ``1.5e+17``) written out in fixed notation."""
    mantissa, _, exp_text = text.partition("e")
    sign = ""
    if mantissa.startswith("-"):
        sign, mantissa = "-", mantissa[1:]
    int_part, _, frac = mantissa.partition(".")
    digits = (int_part + frac).rstrip("0") or "0"  # repr's mantissa is d.ddd with a non-zero first digit
    point = len(int_part) + int(exp_text)
    if point >= len(digits):
        body = digits + "0" * (point - len(digits))
    elif point <= 0:
        body = "0." + "0" * (-point) + digits
    else:
        body = digits[:point] + "." + digits[point:]
    return sign + body


def format_double(value: float) -> str:
    """A double as Go's ``pcommon.Value.AsString`` writes it (ES6 number-to-string, shortest round trip).

    ``1.0`` → ``1``, ``0.5`` → ``0.5``, ``1e21`` → ``1e+21``, ``1e-7`` → ``1e-7``, ``-0.0`` → ``-0``,
    NaN → ``NaN``, ±inf → ``Infinity`` / ``-Infinity``.
    """
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        # Exponent form: shortest mantissa, exponent without zero padding, explicit '+'.
        if "e" not in text:  # cannot happen for these magnitudes, but keep the form right if it ever does
            text = f"{value:e}"
        mantissa, _, exp_text = text.partition("e")
        if mantissa.endswith(".0"):
            mantissa = mantissa[:-2]
        exponent = int(exp_text)
        return f"{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"
    if "e" in text:
        return _expand_exponent(text)
    return text[:-2] if text.endswith(".0") else text


class _NotJson(Exception):
    """A value Go's encoding/json refuses (NaN or ±Inf inside an array or kvlist)."""


def _json_of(value: AnyValue, out: list[str]) -> None:
    """Append the JSON of ``value`` to ``out``. Iterative (an explicit stack of values and literal text), so a
    value nested deeper than Python's recursion limit is written out like any other."""
    stack: list[Any] = [value]
    pop, push, append = stack.pop, stack.append, out.append
    while stack:
        item = pop()
        if type(item) is str:  # literal JSON text pushed by an array or kvlist
            append(item)
            continue
        kind = _which(item, "value")
        if kind == "string_value":
            append(encode_json_string(item.string_value))
        elif kind == "int_value":
            append(str(item.int_value))
        elif kind == "bool_value":
            append("true" if item.bool_value else "false")
        elif kind == "double_value":
            number = item.double_value
            if number != number or number in (math.inf, -math.inf):
                raise _NotJson
            append(format_double(number))
        elif kind == "bytes_value":
            append('"' + base64.b64encode(item.bytes_value).decode("ascii") + '"')
        elif kind == "array_value":
            values = item.array_value.values
            append("[")
            push("]")
            for i in range(len(values) - 1, -1, -1):
                push(values[i])
                if i:
                    push(",")
        elif kind == "kvlist_value":
            # Go builds a map (last duplicate wins), then encoding/json sorts keys (UTF-8 byte order == code
            # point order).
            entries = {kv.key: kv.value for kv in item.kvlist_value.values}
            keys = sorted(entries)
            append("{")
            push("}")
            for i in range(len(keys) - 1, -1, -1):
                push(entries[keys[i]])
                push(encode_json_string(keys[i]) + ":")
                if i:
                    push(",")
        else:
            append("null")


def _json_text(value: AnyValue) -> str:
    if _which(value, "value") == "array_value":
        items = value.array_value.values
        if all(_which(item, "value") == "string_value" for item in items):  # fast path: string[] attributes
            text = "[" + ",".join([encode_json_string(item.string_value) for item in items]) + "]"
            if "\u2028" in text or "\u2029" in text:
                text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
            return text
    out: list[str] = []
    try:
        _json_of(value, out)
    except _NotJson:
        return ""
    text = "".join(out)
    if "\u2028" in text or "\u2029" in text:  # Go escapes the JavaScript line separators, Python does not
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return text


def any_value_to_string(value: AnyValue) -> str:
    """An OTLP ``AnyValue`` as the exporter stores it in a Map column (Go ``pcommon.Value.AsString``)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return str(value.int_value)
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "double_value":
        return format_double(value.double_value)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    if kind is None:
        return ""
    return _json_text(value)  # array_value / kvlist_value


_which = AnyValue.WhichOneof


def _attributes(key_values: Any) -> dict[str, str]:
    """Attributes as a Map column value: AsString values, last duplicate wins, keys sorted."""
    out: dict[str, str] = {}
    for kv in key_values:
        value = kv.value
        text = value.string_value  # '' unless the value is a non-empty string: most are, so test that first
        if text:
            out[kv.key] = text
            continue
        kind = _which(value, "value")
        if kind == "string_value":
            out[kv.key] = text
        elif kind == "int_value":
            out[kv.key] = str(value.int_value)
        else:
            out[kv.key] = any_value_to_string(value)
    if len(out) > 1:
        return dict(sorted(out.items()))  # keys are unique here, so values are never compared
    return out


def _hex_id(raw: bytes, zero: str) -> str:
    text = raw.hex()
    return "" if text == zero or not text else text


def _bad_id(span: Any, what: str, raw: bytes, size: int) -> ValueError:
    return ValueError(
        f"span {span.name[:80]!r} has a {what} of {len(raw)} bytes: OTLP ids are {size} bytes "
        "(or empty), so the request is refused, as the Collector refuses it"
    )


# ------------------------------------------------------------------------------------------ OTLP → rows


def rows_from_resource_spans(resource_spans: ResourceSpans) -> list[tuple[Any, ...]]:
    """Insert rows (:data:`INSERT_COLUMNS` order) of every span in one ``ResourceSpans``."""
    resource_attributes = _attributes(resource_spans.resource.attributes)
    service_name = resource_attributes.get(_SERVICE_NAME, "")
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    kinds, codes = _SPAN_KINDS, _STATUS_CODES
    last_trace, last_trace_hex = b"", ""
    for scope_spans in resource_spans.scope_spans:
        scope = scope_spans.scope
        scope_name, scope_version = scope.name, scope.version
        for span in scope_spans.spans:
            start = span.start_time_unix_nano
            kind = span.kind
            status = span.status
            code = status.code
            trace_id = span.trace_id
            if trace_id != last_trace:  # spans of one trace arrive together: check and hex it once
                if len(trace_id) not in (0, 16):
                    raise _bad_id(span, "trace id", trace_id, 16)
                last_trace, last_trace_hex = trace_id, _hex_id(trace_id, _ZERO_TRACE)
            parent = span.parent_span_id
            raw_span_id = span.span_id
            if len(raw_span_id) not in (0, 8) or len(parent) not in (0, 8):
                bad = raw_span_id if len(raw_span_id) not in (0, 8) else parent
                raise _bad_id(span, "span id" if bad is raw_span_id else "parent span id", bad, 8)
            events = span.events
            if events:
                event_times, event_names, event_attrs = [], [], []
                for event in events:
                    at = event.time_unix_nano
                    event_times.append(at if at <= _I64_MAX else at - _WRAP)
                    event_names.append(event.name)
                    event_attrs.append(_attributes(event.attributes))
            else:
                event_times = event_names = event_attrs = []
            links = span.links
            if links:
                link_traces, link_spans, link_states, link_attrs = [], [], [], []
                for link in links:
                    if len(link.trace_id) not in (0, 16) or len(link.span_id) not in (0, 8):
                        bad_trace = len(link.trace_id) not in (0, 16)
                        raise _bad_id(
                            span,
                            "link's trace id" if bad_trace else "link's span id",
                            link.trace_id if bad_trace else link.span_id,
                            16 if bad_trace else 8,
                        )
                    link_traces.append(_hex_id(link.trace_id, _ZERO_TRACE))
                    link_spans.append(_hex_id(link.span_id, _ZERO_SPAN))
                    link_states.append(link.trace_state)
                    link_attrs.append(_attributes(link.attributes))
            else:
                link_traces = link_spans = link_states = link_attrs = []  # type: ignore[assignment]
            span_id = raw_span_id.hex()
            parent_hex = parent.hex() if parent else ""
            append(
                (
                    start if start <= _I64_MAX else start - _WRAP,  # Go's int64(ts): DateTime64 holds an Int64
                    last_trace_hex,
                    "" if span_id == _ZERO_SPAN else span_id,
                    "" if parent_hex == _ZERO_SPAN else parent_hex,
                    span.trace_state,
                    span.name,
                    kinds[kind] if 0 <= kind < 6 else "",
                    service_name,
                    resource_attributes,
                    scope_name,
                    scope_version,
                    _attributes(span.attributes),
                    (span.end_time_unix_nano - start) & _U64,
                    codes[code] if 0 <= code < 3 else "",
                    status.message,
                    event_times,
                    event_names,
                    event_attrs,
                    link_traces,
                    link_spans,
                    link_states,
                    link_attrs,
                )
            )
    return rows


def rows_from_request(request: ExportTraceServiceRequest | bytes) -> list[tuple[Any, ...]]:
    """Insert rows of every span in an ``ExportTraceServiceRequest`` (a message or its binary encoding)."""
    if isinstance(request, (bytes, bytearray, memoryview)):
        message = ExportTraceServiceRequest()
        message.ParseFromString(bytes(request))
        request = message
    rows: list[tuple[Any, ...]] = []
    for resource_spans in request.resource_spans:
        rows.extend(rows_from_resource_spans(resource_spans))
    return rows


def _record(row: Sequence[Any], read_map: Callable[[Any], dict[str, str]], kind: str, code: str) -> SpanRecord:
    """The :class:`SpanRecord` of a row, its maps read with ``read_map`` and its kind and status code given."""
    events = tuple(
        [
            EventRecord(timestamp_ns=int(t), name=n, attributes=read_map(a))
            for t, n, a in zip(row[15], row[16], row[17], strict=False)
        ]
    )
    links = tuple(
        [
            LinkRecord(trace_id=t, span_id=s, trace_state=st, attributes=read_map(a))
            for t, s, st, a in zip(row[18], row[19], row[20], row[21], strict=False)
        ]
    )
    return SpanRecord(
        timestamp_ns=int(row[0]),
        trace_id=row[1],
        span_id=row[2],
        parent_span_id=row[3],
        trace_state=row[4],
        span_name=row[5],
        span_kind=kind,
        service_name=row[7],
        resource_attributes=read_map(row[8]),
        scope_name=row[9],
        scope_version=row[10],
        span_attributes=read_map(row[11]),
        duration_ns=int(row[12]),
        status_code=code,
        status_message=row[14],
        events=events,
        links=links,
    )


def record_from_row(row: Sequence[Any]) -> SpanRecord:
    """The :class:`SpanRecord` of an insert row (or of a query row selected with :data:`SELECT_COLUMNS`)."""
    return _record(row, dict, row[6], row[13])


def records_from_request(request: ExportTraceServiceRequest | bytes) -> list[SpanRecord]:
    """:class:`SpanRecord` of every span in an ``ExportTraceServiceRequest`` (message or binary encoding)."""
    return [record_from_row(row) for row in rows_from_request(request)]


def _sorted_map(mapping: dict[str, str]) -> dict[str, str]:
    return mapping if len(mapping) < 2 else dict(sorted(mapping.items(), key=_by_key))


def row_from_record(record: SpanRecord) -> tuple[Any, ...]:
    """The insert row (:data:`INSERT_COLUMNS` order) of a :class:`SpanRecord`; maps get sorted keys."""
    events, links = record.events, record.links
    return (
        record.timestamp_ns,
        record.trace_id,
        record.span_id,
        record.parent_span_id,
        record.trace_state,
        record.span_name,
        record.span_kind,
        record.service_name,
        _sorted_map(record.resource_attributes),
        record.scope_name,
        record.scope_version,
        _sorted_map(record.span_attributes),
        record.duration_ns & _U64,
        record.status_code,
        record.status_message,
        [e.timestamp_ns for e in events],
        [e.name for e in events],
        [_sorted_map(e.attributes) for e in events],
        [x.trace_id for x in links],
        [x.span_id for x in links],
        [x.trace_state for x in links],
        [_sorted_map(x.attributes) for x in links],
    )


# ---------------------------------------------------------------------------------------- query → record

_HTML_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00(3[cCeE]|26)")
_HTML_CHARS: Final = {"3c": "<", "3e": ">", "26": "&"}


def unescape_html_json(value: str) -> str:
    """Undo the HTML escaping (``\\u003c`` ``\\u003e`` ``\\u0026``) old Collectors applied to JSON values.

    Only values that look like JSON (start with ``[`` or ``{``) are touched, and an escaped backslash before
    ``u003c`` is respected, so a string that merely contains those characters is left alone.
    """
    if "\\u00" not in value or not value or value[0] not in "[{":
        return value
    return _HTML_ESCAPE.sub(lambda m: m.group(1) + _HTML_CHARS[m.group(2).lower()], value)


_ORDERS_MAX: Final = 1024
_in_order: dict[tuple[str, ...], bool] = {}  # a map's keys as read -> already sorted? (key sets repeat)


def _read_map(mapping: dict[str, str]) -> dict[str, str]:
    """A Map column value as readers get it: a fresh dict, keys sorted, HTML-escaped JSON values unescaped."""
    if len(mapping) < 2:
        out = dict(mapping)
    else:
        keys = tuple(mapping)
        ordered = _in_order.get(keys)
        if ordered is None:
            ordered = list(keys) == sorted(keys)
            if len(_in_order) >= _ORDERS_MAX:
                _in_order.clear()
            _in_order[keys] = ordered
        out = dict(mapping) if ordered else {key: mapping[key] for key in sorted(keys)}
    if "\\u00" in "".join(out.values()):  # rare: only then is each value looked at
        for key, value in out.items():
            if "\\u00" in value:
                out[key] = unescape_html_json(value)
    return out


def record_from_query_row(row: Sequence[Any]) -> SpanRecord:
    """A :class:`SpanRecord` from a row selected with :data:`SELECT_COLUMNS`, whoever wrote it.

    Old ``SPAN_KIND_*`` / ``STATUS_CODE_*`` spellings become ``Internal`` / ``Error`` …, HTML-escaped JSON
    values are unescaped, and maps come back with sorted keys.
    """
    kind, code = row[6], row[13]
    return _record(row, _read_map, _OLD_SPELLINGS.get(kind, kind), _OLD_SPELLINGS.get(code, code))
