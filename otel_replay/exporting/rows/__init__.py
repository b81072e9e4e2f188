"""The one span encoder: SDK spans and OTLP spans → rows of the Collector exporter's ``otel_traces`` table,
and rows → :class:`~otel_replay.records.SpanRecord` back.

Why it exists: a span becomes stored rows on several paths (the spool writer, the store's ingest of spool
segments, the direct ClickHouse exporter, the replay engine's own spans, case files in OTLP JSON), and those
rows must be byte-for-byte what the OpenTelemetry Collector's ``clickhouseexporter`` writes. Each path calls
this module and nothing else turns a span into a stored value, so the paths cannot drift apart:

* :func:`encode_request` — SDK ``ReadableSpan`` s → binary OTLP ``ExportTraceServiceRequest`` (the spool's
  record payload; the same bytes the SDK's OTLP exporter sends to a Collector).
* :func:`rows_from_request` — an OTLP request (message or bytes) → insert rows in :data:`INSERT_COLUMNS`
  order, with the Collector exporter's value rules (ingest, the direct exporter, OTLP JSON).
* :func:`rows_from_spans` / :func:`records_from_spans` — SDK spans straight to rows (:mod:`._direct`, no OTLP
  bytes in between; the replay engine, the testing helpers): the rows of the two steps above, value for value,
  so the rows of a span never depend on whether it went through the spool.
* :func:`record_from_row`, :func:`record_from_query_row`, :func:`row_from_record` — rows back to records
  (as inserted, or as the store reads them: sorted maps, old spellings normalised, HTML-escaped JSON undone)
  and records to rows.

The module sits in the exporting layer: it imports the OTel SDK, the OTLP protobuf classes and
:mod:`otel_replay.records`, and must never import the store, runs or replay, nor do any I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from ...records import SpanRecord
from ._direct import rows_from_sdk_spans
from ._otlp import encode_request
from ._table import (
    INSERT_COLUMN_TYPES,
    INSERT_COLUMNS,
    SELECT_COLUMNS,
    any_value_to_string,
    format_double,
    record_from_query_row,
    record_from_row,
    records_from_request,
    row_from_record,
    rows_from_request,
    rows_from_resource_spans,
    unescape_html_json,
)

__all__ = [
    "INSERT_COLUMNS",
    "INSERT_COLUMN_TYPES",
    "SELECT_COLUMNS",
    "any_value_to_string",
    "encode_request",
    "format_double",
    "record_from_query_row",
    "record_from_row",
    "records_from_request",
    "records_from_spans",
    "row_from_record",
    "rows_from_request",
    "rows_from_resource_spans",
    "rows_from_spans",
    "unescape_html_json",
]


def rows_from_spans(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """Insert rows (:data:`INSERT_COLUMNS` order) of SDK spans: exactly the rows the store holds once the
    spool carrying them is ingested, in the same order (grouped by resource, then scope).

    Written straight from the spans (:mod:`._direct`), not through their OTLP bytes: the rows are those of
    ``rows_from_request(encode_request(spans))``, which the encoder's property test checks byte for byte."""
    return rows_from_sdk_spans(spans) if spans else []


def records_from_spans(spans: Sequence[ReadableSpan], *, as_stored: bool = False) -> list[SpanRecord]:
    """:class:`SpanRecord` of SDK spans, in :func:`rows_from_spans` order.

    ``as_stored=False``: the records of the rows as inserted (:func:`record_from_row`). ``as_stored=True``:
    as :meth:`Store.load_spans <otel_replay.storage.store.Store.load_spans>` reads them back
    (:func:`record_from_query_row`: JSON values that look HTML-escaped are unescaped, as for any reader).
    """
    read = record_from_query_row if as_stored else record_from_row
    return [read(row) for row in rows_from_spans(spans)]
