"""SDK spans → rows of ``otel_traces`` directly, without the OTLP bytes in between (the half of :mod:`.rows` the
replay engine and the testing helpers use when they hold the SDK's spans and need no bytes).

Why it exists: turning a replay's spans into rows through the wire format wrote about 1.4 MB of protobuf for a
1,000-step run and parsed it again at once (two thirds of the time a straight replay spent storing itself).
This walk reads each ``ReadableSpan`` once and writes the row the bytes' path gives, value for value: the rows
of :func:`~otel_replay.exporting.rows.rows_from_request` of
:func:`~otel_replay.exporting.rows.encode_request` of the same spans, in the same order (grouped by resource,
then scope, with :func:`._otlp.group_spans`). It applies both halves' rules at once:

* the encoder's (:mod:`._otlp`): an attribute whose key or value OTLP cannot carry (a type other than None,
  bool, str, int, float, bytes, a sequence or a mapping of those; an int outside int64; text with a lone
  surrogate) is left out and logged, an attribute refused anywhere in an array or kvlist included; subclasses
  are read as their base type, in the SDK's order of checks; a lone surrogate in a span's own text (name,
  event name, status message, trace state, scope name and version) becomes U+FFFD; a span without a context,
  an unknown kind, an id or time out of range raise as there;
* the mapper's (:mod:`._table`): the Collector exporter's ``AsString`` of each value (see ``docs/storage.md``;
  an array or kvlist holding NaN or ±Inf stores ``''``), lowercase hex ids (``''`` for all zeros), times as
  Go's ``int64`` reads them, maps with sorted keys, kind and status names.

``tests/test_row_encoder_property.py`` holds it to the bytes' path byte for byte (``repr`` of the rows) for
spans generated with the real SDK, so a change to either path that the other does not make fails there.

Process-wide state: one bounded cache (a tuple of attribute keys → the same keys sorted), which only ever holds
what it computed from its own key and is cleared when full. This module must never do I/O, never decide a value
differently from the two halves it mirrors, and never raise for one attribute it cannot encode (it drops that
attribute alone).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan

from ._otlp import FIXED64, group_spans, log_dropped, plain_items
from ._table import encode_json_string, format_double

__all__ = ["rows_from_sdk_spans"]

_SPAN_KINDS: Final = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUS_CODES: Final = ("Unset", "Ok", "Error")
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_U64: Final = (1 << 64) - 1
_WRAP: Final = 1 << 64
_SERVICE_NAME: Final = "service.name"
_INF: Final = (math.inf, -math.inf)
_ORDERS_MAX: Final = 1024
_orders: dict[tuple[Any, ...], tuple[str, ...]] = {}  # a span's attribute keys -> sorted (key sets repeat)


class _Refused(Exception):
    """A value OTLP cannot carry: the encoder drops its attribute."""


class _NotJson(Exception):
    """NaN or ±Inf inside an array or kvlist: Go's JSON marshaller fails, the exporter stores ``''``."""


def _fixed(text: str) -> str:
    """A span's own text as the encoder writes it: a lone surrogate becomes U+FFFD (a pair is joined)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _plain_str(value: str) -> str:
    """``value`` checked as the encoder checks text (a lone surrogate raises), as a plain ``str``."""
    if not value.isascii():
        value.encode("utf-8")  # lone surrogates raise: the attribute is dropped
    return value if type(value) is str else str.__str__(value)


def _int_text(value: int) -> str:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _Refused(f"integer {value} is outside int64")
    return str(value)


def _as_string(value: object) -> str:
    """The stored string (``AsString``) of an attribute value; raises where the encoder drops the attribute."""
    kind = type(value)
    if kind is str:
        return _plain_str(value)  # type: ignore[arg-type]
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return _int_text(value)  # type: ignore[arg-type]
    if kind is float:
        return format_double(value)  # type: ignore[arg-type]
    if kind is tuple or kind is list:
        return _json_text(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _plain_str(value)
    if isinstance(value, int):
        return _int_text(int(value))
    if isinstance(value, float):
        return format_double(float(value))
    if isinstance(value, bytes):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (Sequence, Mapping)):
        return _json_text(value)
    raise _Refused(f"invalid type {type(value).__name__}")


def _json_text(value: object) -> str:
    """The JSON text of an array or kvlist value, as the exporter stores it ('' when it holds NaN or ±Inf)."""
    out: list[str] = []
    fine = _json_of(value, out)  # raises _Refused for any element the encoder refuses, NaN or not
    if not fine:
        return ""
    text = "".join(out)
    if "\u2028" in text or "\u2029" in text:  # Go escapes the JavaScript line separators, Python does not
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return text


def _json_of(value: object, out: list[str]) -> bool:
    """Append the JSON of ``value`` (an element of an array or kvlist, or the value itself) to ``out``; False
    when it holds NaN or ±Inf (the rest is still checked, since a refused element drops the attribute)."""
    kind = type(value)
    if kind is str:
        out.append(encode_json_string(_plain_str(value)))  # type: ignore[arg-type]
        return True
    if kind is bool:
        out.append("true" if value else "false")
        return True
    if kind is int:
        out.append(_int_text(value))  # type: ignore[arg-type]
        return True
    if kind is float:
        if value != value or value in _INF:
            return False
        out.append(format_double(value))  # type: ignore[arg-type]
        return True
    if value is None:
        out.append("null")
        return True
    if kind is not tuple and kind is not list:
        if isinstance(value, bool):
            out.append("true" if value else "false")
            return True
        if isinstance(value, str):
            out.append(encode_json_string(_plain_str(value)))
            return True
        if isinstance(value, int):
            out.append(_int_text(int(value)))
            return True
        if isinstance(value, float):
            number = float(value)
            if number != number or number in _INF:
                return False
            out.append(format_double(number))
            return True
        if isinstance(value, bytes):
            out.append('"' + base64.b64encode(bytes(value)).decode("ascii") + '"')
            return True
        if not isinstance(value, Sequence):  # the encoder's order of checks: a sequence first, then a mapping
            if isinstance(value, Mapping):
                return _kvlist_json(value, out)
            raise _Refused(f"invalid type {type(value).__name__}")
    fine = True
    out.append("[")
    items: Sequence[object] = value  # type: ignore[assignment]  # a tuple, a list or another Sequence here
    for i, item in enumerate(items):
        if i:
            out.append(",")
        fine = _json_of(item, out) and fine
    out.append("]")
    return fine


def _kvlist_json(value: Mapping[Any, Any], out: list[str]) -> bool:
    """A kvlist as Go writes it: keys as text (the last of equal texts wins), sorted, values as JSON."""
    entries: dict[str, tuple[list[str], bool]] = {}
    for key, item in value.items():  # every entry is encoded (a refused one drops the attribute) ...
        text = str(key)
        text.encode("utf-8")  # a lone surrogate in a key raises: the attribute is dropped
        written: list[str] = []
        entries[text] = (written, _json_of(item, written))
    fine = True
    out.append("{")
    for i, text in enumerate(sorted(entries)):  # ... and only the last of equal keys is written
        if i:
            out.append(",")
        written, ok = entries[text]
        fine = fine and ok
        out.append(encode_json_string(text) + ":")
        out.extend(written)
    out.append("}")
    return fine


def _attributes(attributes: object) -> dict[str, str]:
    """An attribute mapping as a Map column value (sorted keys); what the encoder drops is left out (logged)."""
    if not attributes:
        return {}
    items = plain_items(attributes)
    keys = tuple(items)
    order = _orders.get(keys)
    if order is None:
        order = _order_of(keys)
    if not order:
        return _any_attributes(items)
    out: dict[str, str] = {}
    for key in order:  # plain ASCII text keys, sorted: the output is built in its final order
        value = items[key]
        if type(value) is str and value.isascii():
            out[key] = value  # the usual case
            continue
        try:
            out[key] = _as_string(value)
        except Exception as exc:  # noqa: BLE001 - as the encoder: this attribute alone is left out
            log_dropped(key, exc)
    return out


def _order_of(keys: tuple[Any, ...]) -> tuple[str, ...]:
    """``keys`` sorted when every one is a plain ASCII ``str`` (remembered, as such key sets repeat), else ()."""
    if not all(type(key) is str and key.isascii() for key in keys):
        return ()
    order = tuple(sorted(keys))
    if len(_orders) >= _ORDERS_MAX:
        _orders.clear()
    _orders[keys] = order
    return order


def _any_attributes(items: Mapping[Any, Any]) -> dict[str, str]:
    """:func:`_attributes` for keys that are not all plain ASCII text."""
    out: dict[str, str] = {}
    for key, value in items.items():
        try:
            if not isinstance(key, str):
                raise _Refused(f"key of type {type(key).__name__}")
            out[_plain_str(key)] = _as_string(value)
        except Exception as exc:  # noqa: BLE001 - as the encoder: this attribute alone is left out
            log_dropped(key, exc)
    if len(out) > 1:
        return dict(sorted(out.items()))
    return out


def _u64(value: Any) -> int:
    """A fixed64 time as the encoder writes it and the mapper reads it (raises where the encoder raises)."""
    if type(value) is int and 0 <= value <= _U64:
        return value
    number: int = FIXED64.unpack(FIXED64.pack(value))[0]
    return number


def _time(value: Any) -> int:
    """A time as stored: the fixed64 read as Go's ``int64`` (0 when the span has none)."""
    if not value:
        return 0
    number = _u64(value)
    return number if number <= _INT64_MAX else number - _WRAP


def _hex(value: Any, size: int) -> str:
    """An id as lowercase hex of ``size`` bytes ('' for zero); out of range raises as ``int.to_bytes``."""
    if type(value) is int and value > 0 and value.bit_length() <= size * 8:
        return format(value, f"0{size * 2}x")
    text: str = value.to_bytes(size, "big").hex()
    return "" if text == "0" * (size * 2) else text


def _row(
    span: ReadableSpan, service_name: str, resource_attributes: dict[str, str], scope: tuple[str, str]
) -> tuple[Any, ...]:
    context = span.get_span_context()
    if context is None:
        raise ValueError(f"span {span.name[:80]!r} has no span context")
    trace_id = _hex(context.trace_id, 16)
    span_id = _hex(context.span_id, 8)
    trace_state = context.trace_state
    state = ""
    if trace_state:
        state = _fixed(",".join([f"{key}={value}" for key, value in trace_state.items()]))
    parent = span.parent
    parent_id = _hex(parent.span_id, 8) if parent is not None else ""
    name = span.name
    kind = span.kind._value_ + 1  # the member's value, without the enum's descriptor
    if not 1 <= kind <= 5:
        raise ValueError(f"span {span.name[:80]!r} has an unknown kind {span.kind!r}")
    start = _u64(span.start_time) if span.start_time else 0
    end = _u64(span.end_time) if span.end_time else 0
    attributes = _attributes(getattr(span, "_attributes", None) or span.attributes)
    event_times: list[int] = []
    event_names: list[str] = []
    event_attrs: list[dict[str, str]] = []
    for event in span.events:
        event_times.append(_time(event.timestamp))
        event_names.append(_fixed(event.name) if event.name else "")
        event_attrs.append(_attributes(event.attributes))
    link_traces: list[str] = []
    link_spans: list[str] = []
    link_states: list[str] = []
    link_attrs: list[dict[str, str]] = []
    for link in span.links:
        link_context = link.context
        link_traces.append(_hex(link_context.trace_id, 16))
        link_spans.append(_hex(link_context.span_id, 8))
        link_states.append("")  # the encoder writes no link trace state, as the SDK's does not
        link_attrs.append(_attributes(link.attributes))
    status = span.status
    code, message = 0, ""
    if status is not None:
        code = status.status_code._value_
        if status.description:
            message = _fixed(status.description)
    return (
        start if start <= _INT64_MAX else start - _WRAP,
        trace_id,
        span_id,
        parent_id,
        state,
        _fixed(name) if name else "",
        _SPAN_KINDS[kind],
        service_name,
        resource_attributes,
        scope[0],
        scope[1],
        attributes,
        (end - start) & _U64,
        _STATUS_CODES[code] if 0 <= code < 3 else "",
        message,
        event_times,
        event_names,
        event_attrs,
        link_traces,
        link_spans,
        link_states,
        link_attrs,
    )


def rows_from_sdk_spans(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """Insert rows (:data:`~otel_replay.exporting.rows.INSERT_COLUMNS` order) of SDK spans, equal to those of
    their OTLP bytes, in the same order. Raises where :func:`~otel_replay.exporting.rows.encode_request` does."""
    rows: list[tuple[Any, ...]] = []
    for resource, scopes in group_spans(spans):
        resource_attributes = _attributes(resource.attributes)
        service_name = resource_attributes.get(_SERVICE_NAME, "")
        for scope, members in scopes:
            names = (
                (_fixed(scope.name) if scope.name else "", _fixed(scope.version) if scope.version else "")
                if scope is not None
                else ("", "")
            )
            for span in members:
                rows.append(_row(span, service_name, resource_attributes, names))
    return rows
