"""DDL for the Collector ``clickhouseexporter``'s trace tables, written from its documented layout.

Why it exists: otel-replay stores spans in exactly the tables the Collector's exporter creates
(``otel_traces``, ``otel_traces_trace_id_ts`` and the materialized view ``otel_traces_trace_id_ts_mv`` that
feeds it), so a store created by ``otel-replay db init`` can be written by a real Collector and vice versa.
Options mirror the exporter's: database, table name, ``cluster_name`` (``ON CLUSTER`` with Replicated
engines), ``ttl`` in days, and the skip-index flavour by server version (``text(tokenizer='array')`` on
ClickHouse 26.2+, bloom filters before).

This module only renders text. It must never execute anything, and it never interpolates a value that is not
a validated identifier or an integer.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_TABLE",
    "TEXT_INDEX_MIN_VERSION",
    "check_identifier",
    "parse_version",
    "render_ddl",
    "render_script",
]

DEFAULT_DATABASE: Final = "default"
"""Database the exporter writes to unless configured."""

DEFAULT_TABLE: Final = "otel_traces"
"""The exporter's default traces table name; the lookup table and view are named after it."""

TEXT_INDEX_MIN_VERSION: Final = (26, 2)
"""First ClickHouse version whose exporter DDL uses ``text(tokenizer='array')`` skip indexes."""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def check_identifier(name: str, *, what: str = "identifier") -> str:
    """``name`` if it is a plain ClickHouse identifier (letters, digits, underscore); ValueError otherwise."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"invalid {what} {name!r}: use letters, digits and underscores, starting with a letter")
    return name


def parse_version(version: str | tuple[int, ...] | None) -> tuple[int, ...] | None:
    """``"26.9.2.1"`` → ``(26, 9, 2, 1)``; None stays None (unknown: the newest layout is rendered)."""
    if version is None:
        return None
    if isinstance(version, tuple):
        return version
    parts = []
    for piece in str(version).split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts) or None


def _uses_text_index(server_version: str | tuple[int, ...] | None) -> bool:
    parsed = parse_version(server_version)
    return parsed is None or parsed[:2] >= TEXT_INDEX_MIN_VERSION


def _indexes(text_index: bool) -> list[str]:
    if text_index:
        id_index = "TYPE text(tokenizer = 'array')"
        map_index = "TYPE text(tokenizer = 'array')"
    else:
        id_index = "TYPE bloom_filter(0.001)"
        map_index = "TYPE bloom_filter(0.01)"
    return [
        f"INDEX idx_trace_id TraceId {id_index} GRANULARITY 1",
        f"INDEX idx_res_attr_key mapKeys(ResourceAttributes) {map_index} GRANULARITY 1",
        f"INDEX idx_res_attr_value mapValues(ResourceAttributes) {map_index} GRANULARITY 1",
        f"INDEX idx_span_attr_key mapKeys(SpanAttributes) {map_index} GRANULARITY 1",
        f"INDEX idx_span_attr_value mapValues(SpanAttributes) {map_index} GRANULARITY 1",
        "INDEX idx_duration Duration TYPE minmax GRANULARITY 1",
        "INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 1",
    ]


def render_ddl(
    *,
    database: str = DEFAULT_DATABASE,
    table: str = DEFAULT_TABLE,
    cluster: str | None = None,
    ttl_days: int | None = None,
    server_version: str | tuple[int, ...] | None = None,
) -> list[str]:
    """The three statements (traces table, trace-id lookup table, materialized view), each idempotent.

    ``cluster`` adds ``ON CLUSTER`` and switches to ``ReplicatedMergeTree`` / ``ReplicatedAggregatingMergeTree``
    (default replication path macros); ``ttl_days`` adds a TTL on both tables; ``server_version`` picks text
    indexes (26.2+, or unknown) or bloom filters (older).
    """
    database = check_identifier(database, what="database name")
    table = check_identifier(table, what="table name")
    if cluster is not None:
        cluster = check_identifier(cluster, what="cluster name")
    if ttl_days is not None and (isinstance(ttl_days, bool) or not isinstance(ttl_days, int) or ttl_days < 1):
        raise ValueError(f"ttl_days must be a positive whole number of days, got {ttl_days!r}")
    on_cluster = f" ON CLUSTER `{cluster}`" if cluster else ""
    engine = "ReplicatedMergeTree" if cluster else "MergeTree"
    agg_engine = "ReplicatedAggregatingMergeTree" if cluster else "AggregatingMergeTree"
    traces = f"`{database}`.`{table}`"
    lookup = f"`{database}`.`{table}_trace_id_ts`"
    view = f"`{database}`.`{table}_trace_id_ts_mv`"
    columns = [
        "Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1))",
        "TraceId String CODEC(ZSTD(1))",
        "SpanId String CODEC(ZSTD(1))",
        "ParentSpanId String CODEC(ZSTD(1))",
        "TraceState String CODEC(ZSTD(1))",
        "SpanName LowCardinality(String) CODEC(ZSTD(1))",
        "SpanKind LowCardinality(String) CODEC(ZSTD(1))",
        "ServiceName LowCardinality(String) CODEC(ZSTD(1))",
        "ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1))",
        "ScopeName String CODEC(ZSTD(1))",
        "ScopeVersion String CODEC(ZSTD(1))",
        "SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1))",
        "Duration UInt64 CODEC(T64, ZSTD(1))",
        "StatusCode LowCardinality(String) CODEC(ZSTD(1))",
        "StatusMessage String CODEC(ZSTD(1))",
        "Events Nested (\n        Timestamp DateTime64(9),\n        Name LowCardinality(String),\n"
        "        Attributes Map(LowCardinality(String), String)\n    ) CODEC(ZSTD(1))",
        "Links Nested (\n        TraceId String,\n        SpanId String,\n        TraceState String,\n"
        "        Attributes Map(LowCardinality(String), String)\n    ) CODEC(ZSTD(1))",
        *_indexes(_uses_text_index(server_version)),
    ]
    body = ",\n    ".join(columns)
    ttl = f"TTL toDateTime(Timestamp) + toIntervalDay({ttl_days})\n" if ttl_days else ""
    lookup_ttl = f"TTL toDateTime(Start) + toIntervalDay({ttl_days})\n" if ttl_days else ""
    traces_sql = (
        f"CREATE TABLE IF NOT EXISTS {traces}{on_cluster} (\n    {body}\n) ENGINE = {engine}()\n"
        "PARTITION BY toDate(Timestamp)\n"
        "PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))\n"
        "ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)\n"
        f"{ttl}"
        "SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"
    )
    lookup_sql = (
        f"CREATE TABLE IF NOT EXISTS {lookup}{on_cluster} (\n"
        "    TraceId String CODEC(ZSTD(1)),\n"
        "    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),\n"
        "    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))\n"
        f") ENGINE = {agg_engine}()\n"
        "PARTITION BY toStartOfWeek(Start)\n"
        "ORDER BY (TraceId)\n"
        f"{lookup_ttl}"
        "SETTINGS index_granularity = 8192"
    )
    view_sql = (
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {view}{on_cluster}\n"
        f"TO {lookup}\n"
        "AS SELECT\n"
        "    TraceId,\n"
        "    min(toDateTime(Timestamp)) AS Start,\n"
        "    max(toDateTime(Timestamp)) AS End\n"
        f"FROM {traces}\n"
        "WHERE TraceId != ''\n"
        "GROUP BY TraceId"
    )
    return [traces_sql, lookup_sql, view_sql]


def render_script(
    *,
    database: str = DEFAULT_DATABASE,
    table: str = DEFAULT_TABLE,
    cluster: str | None = None,
    ttl_days: int | None = None,
    server_version: str | tuple[int, ...] | None = None,
) -> str:
    """:func:`render_ddl` as one ``;``-terminated script (what ``otel-replay db init --print`` prints)."""
    statements = render_ddl(
        database=database, table=table, cluster=cluster, ttl_days=ttl_days, server_version=server_version
    )
    header = (
        "-- otel-replay: ClickHouse tables in the OpenTelemetry Collector clickhouseexporter layout\n"
        f"-- skip indexes: {'text' if _uses_text_index(server_version) else 'bloom_filter'}"
        f"{'; cluster ' + cluster if cluster else ''}{f'; TTL {ttl_days} days' if ttl_days else ''}\n\n"
    )
    return header + ";\n\n".join(statements) + ";\n"
