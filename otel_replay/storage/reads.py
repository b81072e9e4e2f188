"""The reads of the :class:`~otel_replay.storage.store.Store`: one trace's spans through the trace-id lookup table,
several traces at once, a run, the run roots newest first (filters from :mod:`.runlist`), and the span ids
already stored. ``Store`` takes them from ``Reads``, its base class; the connection, the queries' plumbing and
the writes stay in :mod:`.store`.

Like every query of the store, these never put a value into SQL text (values travel as bound parameters
``{name:Type}``) and never return a span stored more than once more than once (``LIMIT 1 BY``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..exporting.rows import SELECT_COLUMNS, record_from_query_row
from ..records import SpanRecord, parse_trace_id
from ..runs import Run, RunSummary, build_run, summary_of
from . import runlist
from .runlist import ONE_ROW_PER_SPAN, RunFilter

if TYPE_CHECKING:
    from typing_extensions import Unpack


class Reads:
    """The reads part of :class:`~otel_replay.storage.store.Store`."""

    if TYPE_CHECKING:  # defined by Store

        @property
        def traces_table(self) -> str: ...

        @property
        def lookup_table(self) -> str: ...

        def _run(self, method: str, sql: str, parameters: dict[str, Any] | None = None) -> Any: ...

    def existing_span_ids(self, trace_ids: Iterable[str]) -> set[tuple[str, str]]:
        """The ``(TraceId, SpanId)`` pairs already stored for any of ``trace_ids``."""
        ids = sorted(set(trace_ids))
        found: set[tuple[str, str]] = set()
        for start in range(0, len(ids), 5000):
            result = self._run(
                "query",
                f"SELECT TraceId, SpanId FROM {self.traces_table} WHERE TraceId IN {{ids:Array(String)}}",
                {"ids": ids[start : start + 5000]},
            )
            found.update((row[0], row[1]) for row in result.result_rows)
        return found

    def _window(self, where: str, parameters: dict[str, Any]) -> tuple[int, int] | None:
        """``min(Start)`` and ``max(End) + 1`` (whole seconds) of the lookup table's rows matching ``where``: the
        time window their spans lie in; None when no row matches."""
        result = self._run(
            "query",
            f"SELECT count(), toUnixTimestamp(min(Start)), toUnixTimestamp(max(End) + 1) FROM {self.lookup_table} "
            f"WHERE {where}",
            parameters,
        )
        count, start, end = result.result_rows[0]
        return (int(start), int(end)) if count else None

    def _trace_window(self, trace_id: str) -> tuple[int, int] | None:
        return self._window("TraceId = {trace_id:String}", {"trace_id": trace_id})

    def has_trace(self, trace_id: str) -> bool:
        """True when the trace-id lookup table knows ``trace_id`` (InvalidTraceIdError for a malformed id)."""
        return self._trace_window(parse_trace_id(trace_id)) is not None

    def load_spans(self, trace_id: str) -> list[SpanRecord]:
        """Every span of one trace, oldest first ([] when unknown), found through the trace-id lookup table.

        As the exporter's docs and Grafana do: ``min(Start)`` / ``max(End) + 1`` from ``{table}_trace_id_ts``,
        then ``TraceId = id AND Timestamp BETWEEN start AND end`` on the traces table. A span stored more than
        once is returned once (the first copy in that order).
        """
        tid = parse_trace_id(trace_id)
        window = self._trace_window(tid)
        if window is None:
            return []
        result = self._run(
            "query",
            f"SELECT {SELECT_COLUMNS} FROM {self.traces_table} WHERE TraceId = {{trace_id:String}} AND Timestamp "
            "BETWEEN toDateTime({start:Int64}) AND toDateTime({end:Int64}) ORDER BY Timestamp, SpanId "
            f"{ONE_ROW_PER_SPAN}",
            {"trace_id": tid, "start": window[0], "end": window[1]},
        )
        return [record_from_query_row(row) for row in result.result_rows]

    def run_rows(self, **criteria: Unpack[RunFilter]) -> list[SpanRecord]:
        """Run root spans, newest first, without their events: parentless spans named ``invoke_agent …``,
        and parentless spans of other GenAI instrumentations (carrying ``gen_ai.operation.name``,
        ``openinference.span.kind``, ``traceloop.span.kind`` or ``llm.request.type``; see
        :mod:`otel_replay.dialects`), which are runs of kind ``original``.

        ``criteria`` are the filters of :class:`~otel_replay.storage.runlist.RunFilter` (``agent``, ``status``,
        ``kind``, ``session``, ``limit``, ``lab``, ``tags``, ``since_ns``, ``until_ns``). A root stored more than
        once is returned once, and ``limit`` counts runs.
        """
        where, params, limit = runlist.run_filter(criteria)
        rows = runlist.newest_first(
            lambda sql, parameters: self._run("query", sql, parameters).result_rows,
            self.traces_table,
            where,
            params,
            limit,
        )
        return [record_from_query_row(row) for row in rows]

    def runs(self, **criteria: Unpack[RunFilter]) -> list[RunSummary]:
        """Run summaries, newest first (see :meth:`run_rows` for the filters)."""
        return [summary_of(root) for root in self.run_rows(**criteria)]

    def load_traces(self, trace_ids: Sequence[str]) -> dict[str, list[SpanRecord]]:
        """Every span of several traces in two queries (the lookup table's windows, then the spans), each
        trace's spans oldest first as :meth:`load_spans` returns them; unknown traces are absent."""
        ids = sorted({parse_trace_id(t) for t in trace_ids})
        if not ids:
            return {}
        window = self._window("TraceId IN {ids:Array(String)}", {"ids": ids})
        if window is None:
            return {}
        start, end = window
        result = self._run(
            "query",
            f"SELECT {SELECT_COLUMNS} FROM {self.traces_table} WHERE TraceId IN {{ids:Array(String)}} AND Timestamp "
            "BETWEEN toDateTime({start:Int64}) AND toDateTime({end:Int64}) ORDER BY TraceId, Timestamp, SpanId "
            f"{ONE_ROW_PER_SPAN}",
            {"ids": ids, "start": start, "end": end},
        )
        found: dict[str, list[SpanRecord]] = {}
        for row in result.result_rows:
            record = record_from_query_row(row)
            found.setdefault(record.trace_id, []).append(record)
        return found

    def load_run(self, trace_id: str) -> Run:
        """The run recorded in one trace (TraceNotFoundError when the store does not have it)."""
        tid = parse_trace_id(trace_id)
        return build_run(self.load_spans(tid), trace_id=tid)
