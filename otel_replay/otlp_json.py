"""Spans as OTLP JSON (the protocol's JSON encoding), to and from :class:`~otel_replay.records.SpanRecord`.

Case files carry their trace in this form, so a case is plain OTLP that any OpenTelemetry tool reads, and a
trace written by the Collector's ``file`` exporter (or any OTLP/HTTP JSON sender) can become a case.

Writing follows the OTLP/JSON rules: lowerCamelCase keys, trace and span ids as hex strings, enums as
integers, 64-bit integers as decimal strings, empty fields left out. Attribute values are the stored strings
(the store keeps every value as the Collector exporter's string form, see ``docs/storage.md``), so a trace
read back from a case gives the same records as the store held. Reading goes through the protobuf message and
:func:`~otel_replay.exporting.rows.records_from_request`, the same path the store ingests through, and
accepts any valid OTLP JSON: typed values, ``intValue`` as a number or a string, unknown fields ignored.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any, Final

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .errors import OtelReplayError
from .exporting.rows import records_from_request
from .records import SpanRecord

_SPAN_KINDS: Final = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUS_CODES: Final = ("Unset", "Ok", "Error")
_HEX_ID: Final = re.compile(r"[0-9a-fA-F]*")


class OtlpJsonError(OtelReplayError):
    """A document is not valid OTLP JSON."""


def _attributes(mapping: dict[str, str]) -> list[dict[str, Any]]:
    return [{"key": key, "value": {"stringValue": value}} for key, value in sorted(mapping.items())]


def _span(record: SpanRecord) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": record.trace_id, "spanId": record.span_id}
    if record.parent_span_id:
        span["parentSpanId"] = record.parent_span_id
    if record.trace_state:
        span["traceState"] = record.trace_state
    span["name"] = record.span_name
    span["kind"] = _SPAN_KINDS.index(record.span_kind) if record.span_kind in _SPAN_KINDS else 0
    span["startTimeUnixNano"] = str(record.timestamp_ns)
    span["endTimeUnixNano"] = str(record.end_ns)
    if record.span_attributes:
        span["attributes"] = _attributes(record.span_attributes)
    if record.events:
        span["events"] = [
            {
                "timeUnixNano": str(e.timestamp_ns),
                "name": e.name,
                **({"attributes": _attributes(e.attributes)} if e.attributes else {}),
            }
            for e in record.events
        ]
    if record.links:
        span["links"] = [
            {
                "traceId": link.trace_id,
                "spanId": link.span_id,
                **({"traceState": link.trace_state} if link.trace_state else {}),
                **({"attributes": _attributes(link.attributes)} if link.attributes else {}),
            }
            for link in record.links
        ]
    status: dict[str, Any] = {}
    code = _STATUS_CODES.index(record.status_code) if record.status_code in _STATUS_CODES else 0
    if code:
        status["code"] = code
    if record.status_message:
        status["message"] = record.status_message
    span["status"] = status
    return span


def to_otlp_json(records: Iterable[SpanRecord]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in OTLP JSON holding ``records``: one resource per distinct resource,
    one scope per distinct scope, spans in start order (then span id), so the same spans always give the
    same document."""
    resources: dict[tuple[tuple[str, str], ...], dict[tuple[str, str], list[SpanRecord]]] = {}
    for record in sorted(records, key=lambda r: (r.timestamp_ns, r.span_id)):
        resource = tuple(sorted(record.resource_attributes.items()))
        resources.setdefault(resource, {}).setdefault((record.scope_name, record.scope_version), []).append(record)
    resource_spans = []
    for resource, scopes in resources.items():
        scope_spans = []
        for (name, version), spans in scopes.items():
            scope = {"name": name, **({"version": version} if version else {})}
            scope_spans.append({"scope": scope, "spans": [_span(s) for s in spans]})
        resource_spans.append({"resource": {"attributes": _attributes(dict(resource))}, "scopeSpans": scope_spans})
    return {"resourceSpans": resource_spans}


def _id_to_base64(value: Any, where: str, size: int) -> str:
    if not isinstance(value, str) or not _HEX_ID.fullmatch(value) or len(value) not in (0, size * 2):
        raise OtlpJsonError(f"{where} must be {size * 2} hex digits, got {str(value)[:80]!r}")
    return base64.b64encode(bytes.fromhex(value)).decode("ascii")


def _ids_to_base64(doc: Any) -> Any:
    """A copy of an OTLP JSON document with its hex ids in protobuf JSON's base64 form."""
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans", []), list):
        raise OtlpJsonError("not OTLP JSON: expected an object with a resourceSpans list")
    out = dict(doc)
    out["resourceSpans"] = []
    for rs in doc.get("resourceSpans") or []:
        if not isinstance(rs, dict) or not isinstance(rs.get("scopeSpans", []), (list, type(None))):
            raise OtlpJsonError("not OTLP JSON: a resourceSpans item is not an object with a scopeSpans list")
        rs = dict(rs)
        scope_spans = []
        for ss in rs.get("scopeSpans") or []:
            if not isinstance(ss, dict) or not isinstance(ss.get("spans", []), list):
                raise OtlpJsonError("not OTLP JSON: a scopeSpans item is not an object with a spans list")
            ss = dict(ss)
            spans = []
            for span in ss.get("spans") or []:
                if not isinstance(span, dict) or not isinstance(span.get("links", []), (list, type(None))):
                    raise OtlpJsonError("not OTLP JSON: a span is not an object with a links list")
                span = dict(span)
                for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                    if key in span:
                        span[key] = _id_to_base64(span[key], f"span {key}", size)
                links = []
                for link in span.get("links") or []:
                    if not isinstance(link, dict):
                        raise OtlpJsonError("not OTLP JSON: a span link is not an object")
                    link = dict(link)
                    for key, size in (("traceId", 16), ("spanId", 8)):
                        if key in link:
                            link[key] = _id_to_base64(link[key], f"link {key}", size)
                    links.append(link)
                if "links" in span:
                    span["links"] = links
                spans.append(span)
            ss["spans"] = spans
            scope_spans.append(ss)
        rs["scopeSpans"] = scope_spans
        out["resourceSpans"].append(rs)
    return out


def from_otlp_json(doc: Any) -> list[SpanRecord]:
    """The records of an OTLP JSON ``ExportTraceServiceRequest`` (:class:`OtlpJsonError` when it is not one)."""
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(_ids_to_base64(doc), message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpJsonError(f"not OTLP JSON: {' '.join(str(exc).split())[:300]}") from None
    return records_from_request(message)
