"""Spans as ClickHouse stores them: one :class:`SpanRecord` per row of ``otel_traces``.

Every read and write path speaks these records: the OTLP → row mapping produces them, the Store inserts and
loads them, and :mod:`otel_replay.runs` rebuilds runs from them. Fields mirror the Collector exporter's
columns one for one; attribute values are the exporter's strings (see ``docs/storage.md``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One element of the ``Events`` nested column."""

    timestamp_ns: int
    name: str
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """One element of the ``Links`` nested column."""

    trace_id: str
    span_id: str
    trace_state: str = ""
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One row of ``otel_traces``; ids are lowercase hex, times are nanoseconds since the epoch."""

    timestamp_ns: int
    trace_id: str
    span_id: str
    parent_span_id: str
    trace_state: str
    span_name: str
    span_kind: str
    service_name: str
    resource_attributes: dict[str, str]
    scope_name: str
    scope_version: str
    span_attributes: dict[str, str]
    duration_ns: int
    status_code: str
    status_message: str
    events: tuple[EventRecord, ...] = ()
    links: tuple[LinkRecord, ...] = ()

    @property
    def end_ns(self) -> int:
        """End time in nanoseconds since the epoch."""
        return self.timestamp_ns + self.duration_ns

    @property
    def is_error(self) -> bool:
        """True when the span's status is an error, in the current or the pre-2024 exporter spelling."""
        return self.status_code in ("Error", "STATUS_CODE_ERROR")


_HEX = frozenset("0123456789abcdef")


_ZERO_TRACE_ID: Final = "0" * 32


def parse_trace_id(text: str) -> str:
    """A trace id as stored (32 lowercase hex characters, not all zeros); raises InvalidTraceIdError otherwise."""
    from .errors import InvalidTraceIdError

    value = str(text).strip().lower()
    if len(value) != 32 or not _HEX.issuperset(value):
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise InvalidTraceIdError(f"{shown!r} is not a trace id: expected 32 hexadecimal characters")
    if value == _ZERO_TRACE_ID:  # W3C Trace Context: an all-zero trace id is invalid
        raise InvalidTraceIdError(f"trace id {value} is invalid: all zeros is not a trace id")
    return value


def one_per_span(records: Iterable[SpanRecord]) -> list[SpanRecord]:
    """``records`` with one record per ``(trace_id, span_id)``: the first seen, in the order given.

    At-least-once delivery (an SDK retrying a batch the Collector had already inserted, a Collector restarting
    between its insert and its acknowledgement) stores the same span as several identical rows; every reader
    counts it once. Copies of one span are the same encoded row, so keeping the first one loses nothing.
    """
    seen: set[tuple[str, str]] = set()
    kept: list[SpanRecord] = []
    for record in records:
        key = (record.trace_id, record.span_id)
        if key not in seen:
            seen.add(key)
            kept.append(record)
    return kept


def stored_int(text: str | None, default: int | None = None) -> int | None:
    """An int attribute as stored (a string; ``1.0`` when a pipeline wrote a double), else ``default``."""
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except (ValueError, OverflowError):
            return default
