"""SDK spans → the binary OTLP ``ExportTraceServiceRequest``, written directly (the half of :mod:`.rows` that
turns a ``ReadableSpan`` into wire bytes).

The SDK's encoder builds one protobuf object per span, event, attribute and value before serialising them,
which made it the largest single cost of recording (about 1.4 µs per attribute). This writer produces the
bytes itself: fields in field-number order, proto3 defaults left out, exactly as the SDK's
``encode_spans(spans).SerializeToString()`` does, including its rules for values it cannot encode:

* an attribute whose key or value OTLP cannot carry (a type other than None, bool, str, int, float, bytes, a
  sequence or a mapping of those; an int outside int64; text with a lone surrogate, which is not UTF-8; a
  value nested past the recursion limit) is left out and logged, as the SDK's encoder logs and drops it;
* subclasses (an ``IntEnum``, a ``str`` enum) are encoded as their base type, ``bytes`` as bytes, any other
  sequence as an array and a mapping as a kvlist with ``str`` keys, in the SDK's order of checks.

One decision of its own: a span name, event name, status message, trace state or scope name holding a lone
surrogate fails the SDK's whole batch; here the surrogate becomes U+FFFD and the span is kept.

Tags are written as bytes: (field number << 3) | wire type, where wire type 0 is a varint, 1 a fixed64,
2 length-delimited and 5 a fixed32; e.g. b"\\x4a" is Span field 9 (attributes), b"\\x85\\x01" field 16
(flags). Field numbers are those of opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto.

Process-wide state: two bounded caches (encoded attribute keys, and encoded key/short-string pairs), which
only ever hold bytes computed from their own key and are cleared when full. This module must never do I/O,
and never raise for one attribute it cannot encode (it drops that attribute alone).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan

_log = logging.getLogger("otel_replay.rows")

_VARINT_SMALL: Final = tuple(bytes((i,)) for i in range(128))
_LENGTHS: Final = _VARINT_SMALL + tuple(bytes(((i & 127) | 128, i >> 7)) for i in range(128, 1 << 12))
_LENGTHS_END: Final = 1 << 12
_DOUBLE: Final = struct.Struct("<d")
FIXED64: Final = struct.Struct("<Q")
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_CACHE_MAX: Final = 4096
_CACHED_VALUE_CHARS: Final = 48
_key_fields: dict[str, bytes] = {}  # attribute key -> its encoded KeyValue.key field (keys are few and reused)
_pairs: dict[tuple[str, str], bytes] = {}  # (key, short string value) -> encoded KeyValue (such values repeat)


class _Refused(Exception):
    """A value OTLP cannot carry: the SDK's encoder drops its attribute."""


def _varint(n: int) -> bytes:
    if n < _LENGTHS_END:
        return _LENGTHS[n]
    out = bytearray()
    while n > 127:
        out.append((n & 127) | 128)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag + (_LENGTHS[n] if n < _LENGTHS_END else _varint(n)) + payload


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (not encodable) becomes U+FFFD instead of failing the batch."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").encode("utf-8")


def _int(value: int) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _Refused(f"integer {value} is outside int64")
    return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)


def _any_value(value: object) -> bytes:
    """An encoded ``AnyValue`` (the SDK encoder's type order: None, bool, str, int, float, bytes, sequence,
    mapping). Raises for a value the SDK's encoder refuses (the caller drops its attribute)."""
    kind = type(value)
    if kind is str:
        return _field(b"\x0a", value.encode("utf-8"))  # type: ignore[attr-defined]  # lone surrogates raise
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int:
        return _int(value)  # type: ignore[arg-type]
    if kind is float:
        return b"\x21" + _DOUBLE.pack(value)
    if kind is tuple or kind is list:
        return _field(b"\x2a", b"".join([_field(b"\x0a", _any_value(v)) for v in value]))  # type: ignore[attr-defined]
    if value is None:
        return b""
    return _any_value_of_subclass(value)


def _any_value_of_subclass(value: object) -> bytes:
    """:func:`_any_value` for subclasses and the rarer types, checked with ``isinstance`` as the SDK does."""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _field(b"\x0a", str.encode(value, "utf-8"))
    if isinstance(value, int):
        return _int(int(value))
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", bytes(value))
    if isinstance(value, Sequence):
        return _field(b"\x2a", b"".join([_field(b"\x0a", _any_value(v)) for v in value]))
    if isinstance(value, Mapping):
        entries = [
            _field(b"\x0a", _field(b"\x0a", str(k).encode("utf-8")) + _field(b"\x12", _any_value(v)))
            for k, v in value.items()
        ]
        return _field(b"\x32", b"".join(entries))
    raise _Refused(f"invalid type {type(value).__name__}")


def _key_field(key: str) -> bytes:
    """The encoded ``KeyValue.key`` field of ``key`` (cached: keys are few and reused)."""
    key_field = _key_fields.get(key)
    if key_field is None:
        if not isinstance(key, str):
            raise _Refused(f"key of type {type(key).__name__}")
        key_field = _field(b"\x0a", str.encode(key, "utf-8"))
        if len(_key_fields) >= _CACHE_MAX:
            _key_fields.clear()
        _key_fields[key] = key_field
    return key_field


def plain_items(attributes: object) -> Any:
    """The plain dict behind an SDK attribute mapping (``BoundedAttributes``): iterating it directly spares
    a lookup per item; the span has ended, so nothing changes it any more."""
    if type(attributes) is dict:
        return attributes
    inner = getattr(attributes, "_dict", None)
    return inner if type(inner) is dict else attributes


def log_dropped(key: object, error: Exception) -> None:
    _log.warning("otel-replay: attribute %r left out of the exported span: %s", key, error or type(error).__name__)


def _attributes(tag: bytes, attributes: object) -> bytes:
    """Repeated ``KeyValue`` fields (``tag`` is the field's tag) for an attribute mapping; an attribute whose
    key or value cannot be encoded is left out (logged), as the SDK's encoder does."""
    if not attributes:
        return b""
    parts: list[bytes] = []
    pairs = _pairs
    keys = _key_fields
    lengths = _LENGTHS
    end = _LENGTHS_END
    for key, value in plain_items(attributes).items():
        try:
            kind = type(value)
            if kind is str:
                if len(value) <= _CACHED_VALUE_CHARS:
                    pair = pairs.get((key, value))
                    if pair is None:
                        pair = _key_field(key) + _field(b"\x12", _field(b"\x0a", value.encode("utf-8")))
                        if len(pairs) >= _CACHE_MAX:
                            pairs.clear()
                        pairs[(key, value)] = pair
                else:  # a long string (a hash, a payload): written in pieces, never copied into a pair first
                    data = value.encode("utf-8")  # lone surrogates raise: the attribute is dropped
                    key_field = keys.get(key) or _key_field(key)
                    n = len(data)
                    size = lengths[n] if n < end else _varint(n)
                    n += 1 + len(size)
                    any_size = lengths[n] if n < end else _varint(n)
                    n += len(key_field) + 1 + len(any_size)
                    parts.extend(
                        (tag, lengths[n] if n < end else _varint(n), key_field, b"\x12", any_size, b"\x0a", size, data)
                    )
                    continue
            elif kind is int and 0 <= value < end:
                size = lengths[value]
                pair = (keys.get(key) or _key_field(key)) + b"\x12" + _VARINT_SMALL[1 + len(size)] + b"\x18" + size
            else:
                pair = (keys.get(key) or _key_field(key)) + _field(b"\x12", _any_value(value))
        except Exception as exc:  # noqa: BLE001 - as the SDK's encoder: this attribute alone is left out
            log_dropped(key, exc)
            continue
        n = len(pair)
        parts.append(tag + (lengths[n] if n < end else _varint(n)) + pair)
    return b"".join(parts)


def _flags(context: object) -> bytes:
    # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK (0x100), plus SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK (0x200) if remote
    return b"\x00\x03\x00\x00" if context is not None and context.is_remote else b"\x00\x01\x00\x00"  # type: ignore[attr-defined]


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    if context is None:
        raise ValueError(f"span {span.name[:80]!r} has no span context")
    parts = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
    trace_state = context.trace_state
    if trace_state:  # most spans have none: skip building an empty text
        state = ",".join([f"{key}={value}" for key, value in trace_state.items()])
        if state:
            parts.append(_field(b"\x1a", _utf8(state)))
    parent = span.parent
    if parent is not None:
        parts.append(b"\x22\x08")
        parts.append(parent.span_id.to_bytes(8, "big"))
    name = span.name
    if name:
        parts.append(_field(b"\x2a", _utf8(name)))
    kind = span.kind.value + 1  # SpanKind.INTERNAL (0) is SPAN_KIND_INTERNAL (1), and so on
    if not 1 <= kind <= 5:
        raise ValueError(f"span {span.name[:80]!r} has an unknown kind {span.kind!r}")
    parts.append(b"\x30" + _VARINT_SMALL[kind])
    if span.start_time:
        parts.append(b"\x39" + FIXED64.pack(span.start_time))
    if span.end_time:
        parts.append(b"\x41" + FIXED64.pack(span.end_time))
    parts.append(_attributes(b"\x4a", getattr(span, "_attributes", None) or span.attributes))
    dropped = span.dropped_attributes
    if dropped:
        parts.append(b"\x50" + _varint(dropped))
    for event in span.events:
        body = []
        if event.timestamp:
            body.append(b"\x09" + FIXED64.pack(event.timestamp))
        if event.name:
            body.append(_field(b"\x12", _utf8(event.name)))
        body.append(_attributes(b"\x1a", event.attributes))
        dropped = event.dropped_attributes
        if dropped:
            body.append(b"\x20" + _varint(dropped))
        parts.append(_field(b"\x5a", b"".join(body)))
    dropped = span.dropped_events
    if dropped:
        parts.append(b"\x60" + _varint(dropped))
    for link in span.links:
        link_context = link.context
        body = [
            b"\x0a\x10",
            link_context.trace_id.to_bytes(16, "big"),
            b"\x12\x08",
            link_context.span_id.to_bytes(8, "big"),
            _attributes(b"\x22", link.attributes),
        ]
        dropped = link.dropped_attributes
        if dropped:
            body.append(b"\x28" + _varint(dropped))
        body.append(b"\x35" + _flags(link_context))
        parts.append(_field(b"\x6a", b"".join(body)))
    dropped = span.dropped_links
    if dropped:
        parts.append(b"\x70" + _varint(dropped))
    status = span.status
    if status is not None:
        body = []
        if status.description:
            body.append(_field(b"\x12", _utf8(status.description)))
        code = status.status_code.value
        if code:
            body.append(b"\x18" + _varint(code))
        parts.append(_field(b"\x7a", b"".join(body)))
    parts.append(b"\x85\x01" + _flags(parent))
    return _field(b"\x12", b"".join(parts))  # one ScopeSpans.spans field


def _scope(scope: Any) -> bytes:
    """The ``ScopeSpans.scope`` field."""
    if scope is None:
        return b"\x0a\x00"
    body = []
    if scope.name:
        body.append(_field(b"\x0a", _utf8(scope.name)))
    if scope.version:
        body.append(_field(b"\x12", _utf8(scope.version)))
    body.append(_attributes(b"\x1a", scope.attributes))
    return _field(b"\x0a", b"".join(body))


def group_spans(spans: Sequence[ReadableSpan]) -> list[tuple[Any, list[tuple[Any, list[ReadableSpan]]]]]:
    """``spans`` grouped by resource, then scope, in order of first appearance, as the SDK's encoder groups
    them (by value; the identity lookups only spare hashing a Resource per span): ``[(resource, [(scope or
    None, spans)])]``. Every path from SDK spans to rows (bytes or rows directly) groups them with this."""
    canonical: dict[int, Any] = {}
    by_value: dict[Any, Any] = {}
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[ReadableSpan]]]]] = {}
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope or None
        resource_key = canonical.get(id(resource))
        if resource_key is None:
            resource_key = canonical[id(resource)] = by_value.setdefault(resource, resource)
        scope_key = None
        if scope is not None:
            scope_key = canonical.get(id(scope))
            if scope_key is None:
                scope_key = canonical[id(scope)] = by_value.setdefault(("scope", scope), scope)
        group = groups.get(id(resource_key))
        if group is None:
            group = groups[id(resource_key)] = (resource_key, {})
        scoped = group[1].get(id(scope_key))
        if scoped is None:
            scoped = group[1][id(scope_key)] = (scope_key, [])
        scoped[1].append(span)
    return [(resource, list(scopes.values())) for resource, scopes in groups.values()]


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """The binary OTLP ``ExportTraceServiceRequest`` of ``spans``: the bytes the SDK's
    ``encode_spans(spans).SerializeToString()`` gives (see the module docstring for the one difference).

    Spans are grouped by resource, then scope (:func:`group_spans`). Raises only for a span the SDK cannot
    encode either (no context, an id or time out of range).
    """
    out = []
    for resource, scopes in group_spans(spans):
        body = [_field(b"\x0a", _attributes(b"\x0a", resource.attributes))]
        for scope, scope_members in scopes:
            scope_spans = [_scope(scope), *[_span(span) for span in scope_members]]
            schema_url = scope.schema_url if scope is not None else None
            if schema_url:
                scope_spans.append(_field(b"\x1a", _utf8(schema_url)))
            body.append(_field(b"\x12", b"".join(scope_spans)))
        schema_url = resource.schema_url
        if schema_url:
            body.append(_field(b"\x1a", _utf8(schema_url)))
        out.append(_field(b"\x0a", b"".join(body)))
    return b"".join(out)
