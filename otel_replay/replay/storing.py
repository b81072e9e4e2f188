"""Where a replay's spans go while its agent runs, and the replay's run as the store holds it afterwards.

Why it exists: a replay is recorded as a new trace, and before :func:`~otel_replay.replay.engine.replay`
returns, that trace must be stored as its own run and read as the store reads it (the result's ``replay`` and
``diff``). There are two ways, chosen per replay by :func:`capturing`:

* **Straight into the store** (a replay that cannot cause real effects, recorded by a runtime whose exporter
  is the spool that feeds the store the replay was given): the agent runs under a runtime of its own
  (:func:`otel_replay.runtime.active`) whose pipeline scrubs each ended span as every pipeline does and hands
  it to this module instead of an exporter. Once the agent is done, the spans are encoded once by the one
  span encoder (:mod:`otel_replay.exporting.rows`), their rows inserted into the store, and the replay's run
  built from the same rows read as the store reads them (:func:`~otel_replay.exporting.rows.record_from_query_row`).
  No spool segment is written, sealed, read, ingested or read back. The rows are exactly those the spool's
  ingest would have inserted, so the store ends up the same: after an ingest the spool no longer holds them
  either.
* **Through the runtime's exporter**, as any recording (a live replay or one with the side-effect guard off,
  whose spans the spool keeps even when the process is killed half-way; any other exporter; a store the spool
  does not feed; no store): the spans are exported, flushed, the spool ingested, and the run read from the
  store unless it holds exactly the spans this process saw (then built from them, as above).

When the straight insert fails, the spans go to the spool instead (the next ingest stores them); when a span of
the replay's trace was started where the replay's runtime was not active (a thread given only the OpenTelemetry
context), it went through the exporter, so the store is read after an ingest.

A span that ends after the replayed agent returned (a thread the agent left running) is not stored: the
replay's runtime is closed by then (docs/replay.md). An insert cut short whose store then cannot say which
spans it holds sends them all to the spool, so a span may be stored twice; readers count it once
(docs/storage.md).

This module must never drop a span of the replay that ended before the agent returned without logging it, and
never touch the original run's rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from .. import runtime
from ..errors import OtelReplayError
from ..exporting import setup
from ..exporting.rows import record_from_query_row, records_from_spans, rows_from_spans
from ..records import SpanRecord
from ..runs import Run, build_run
from .safety import journal

if TYPE_CHECKING:
    from ..runtime import Runtime
    from .session import ReplaySession

__all__ = ["Capture", "capturing", "ingest", "load_replay", "stored_records"]

_log = logging.getLogger("otel_replay")  # a logger redaction.LOGGER_NAMES scrubs


@dataclass(eq=False)
class Capture:
    """The spans of one replay as its pipeline hands them over, and the way they reach the store."""

    session: ReplaySession
    store: Any
    outer: Runtime
    """The runtime the replay was started under (its exporter is the usual way to the store)."""
    own: Runtime | None = None
    """The replay's own runtime when its spans go straight into the store, else None."""
    spans: list[ReadableSpan] = field(default_factory=list)
    """Every span that ended under the replay's own runtime (straight path), or the replay trace's spans that
    went through the exporter (the other path)."""
    strays: int = 0
    """Spans of the replay's trace that went through the outer runtime's exporter on the straight path."""
    rows: list[tuple[Any, ...]] | None = field(default=None, repr=False)
    """The rows inserted straight into the store (None until then, or when the insert failed)."""

    @property
    def direct(self) -> bool:
        """True when the replay's spans go straight into the store."""
        return self.own is not None

    def _keep(self, span: ReadableSpan) -> None:
        trace_id = self.session.trace_id
        if trace_id is not None and _trace_of(span) == trace_id:
            self.spans.append(span)

    def _stray(self, span: ReadableSpan) -> None:
        trace_id = self.session.trace_id
        if trace_id is not None and _trace_of(span) == trace_id:
            self.strays += 1

    def store_replay(self) -> None:
        """Store the replay's spans (the agent is done and the runtime flushed): the straight insert, or an
        ingest of the spool. Never raises: a span the store did not take goes to the spool for the next ingest."""
        if not self.direct:
            ingest(self.store)
            return
        if not self.spans:
            return
        try:
            rows = rows_from_spans(self.spans)
            self.store.insert_rows(rows)
        except Exception:  # noqa: BLE001 - the replay already happened: its spans go the spool's way instead
            _log.warning("otel-replay: could not store the replay directly; it goes through the spool", exc_info=True)
            self._spool_instead()
            return
        self.rows = rows
        if self.strays:  # part of the trace went through the exporter: the store ingests it too
            setup.flush(rt=self.outer)
            ingest(self.store)

    def _spool_instead(self) -> None:
        """Hand the spans the store did not take to the spool (an insert cut short may have stored some)."""
        spans = self.spans
        try:
            present = self.store.existing_span_ids({_trace_of(s) for s in spans} - {None})
        except Exception:  # noqa: BLE001 - the store does not answer: none of them is there
            present = set()
        if present:
            spans = [s for s in spans if (_trace_of(s), _span_of(s)) not in present]
        exporter = self.outer.exporter
        if spans and (exporter is None or exporter.export(spans) is not SpanExportResult.SUCCESS):
            _log.error("otel-replay: %d span(s) of the replay could neither be stored nor spooled", len(spans))
        setup.flush(rt=self.outer)
        ingest(self.store)

    def replay_run(self) -> Run | None:
        """The replay's run as the store holds it (None when no run was recorded, or it cannot be built)."""
        trace_id = self.session.trace_id
        if trace_id is None:
            return None
        if self.rows is not None and not self.strays:
            records = [record_from_query_row(row) for row in self.rows if row[1] == trace_id]
            records.sort(key=_stored_order)
            try:
                return build_run(records, trace_id=trace_id) if records else None
            except OtelReplayError:
                return None  # the store's copy is the same rows and fails the same way
        spans = [s for s in self.spans if _trace_of(s) == trace_id]
        if self.rows is not None:  # stored, partly through the exporter: the store has the whole trace
            try:
                stored: Run = self.store.load_run(trace_id)
            except OtelReplayError:
                return _build(spans)
            return stored
        return load_replay(self.store, trace_id, spans)


def _trace_of(span: ReadableSpan) -> str | None:
    context = span.context
    return f"{context.trace_id:032x}" if context is not None else None


def _span_of(span: ReadableSpan) -> str | None:
    context = span.context
    return f"{context.span_id:016x}" if context is not None else None


def _stored_order(record: SpanRecord) -> tuple[int, str]:
    """The order :meth:`Store.load_spans <otel_replay.storage.store.Store.load_spans>` reads a trace in."""
    return (record.timestamp_ns, record.span_id)


def _straight_runtime(outer: Runtime, session: ReplaySession, store: Any) -> Runtime | None:
    """A runtime of the replay's own whose pipeline exports nowhere (this module stores its spans), or None
    when the replay's spans must go through ``outer``'s exporter."""
    if store is None or journal.needs_record(session) or outer.exporter_name != "spool":
        return None
    spool = getattr(outer.exporter, "directory", None)
    home = getattr(store, "home", None)
    if spool is None or home is None or not callable(getattr(store, "insert_rows", None)):
        return None
    try:
        if Path(spool).resolve() != (Path(home) / "spool").resolve():
            return None  # the spool feeds another store: the replay goes where it would have gone
    except OSError:
        return None
    built = setup.build_runtime(exporter="none", home=outer.home, redaction=outer.redactor)
    # The same provider, tracer and limits as the outer runtime: only where the spans go differs.
    return dataclasses.replace(
        built,
        provider=outer.provider,
        tracer=outer.tracer,
        limits=outer.limits,
        home_given=outer.home_given,
        store_url=outer.store_url,
    )


@contextlib.contextmanager
def capturing(session: ReplaySession, store: Any) -> Iterator[Capture]:
    """Run the block (the replayed agent) with its spans captured for :meth:`Capture.store_replay`."""
    outer = setup.runtime()
    own = _straight_runtime(outer, session, store)
    capture = Capture(session=session, store=store, outer=outer, own=own)
    if own is None:
        with setup.tap(capture._keep, rt=outer):
            yield capture
        return
    try:
        with setup.tap(capture.spans.append, rt=own), setup.tap(capture._stray, rt=outer), runtime.active(own):
            yield capture
    except BaseException:
        # the block did not end normally (the agent raised SystemExit or KeyboardInterrupt past the engine):
        # what the replay recorded up to there still goes to the spool, as on the spool's way
        with contextlib.suppress(Exception):
            setup.flush(rt=own)
        capture._spool_instead()
        raise
    finally:
        setup.close(own)


# ------------------------------------------------------------------------- through the exporter's way


def ingest(store: Any) -> None:
    """Ingest the spool into ``store`` (if any); a failure is left to the next ingest (the store's next open)."""
    if store is None:
        return
    try:
        store.ingest()
    except Exception:  # noqa: BLE001 - the replay already happened; the store picks it up on next open
        pass


def load_replay(store: Any, trace_id: str | None, spans: list[ReadableSpan]) -> Run | None:
    """The replay as the store holds it (the spool was just ingested).

    It is built from the spans this process saw, mapped to records exactly as the ingest maps and the store
    reads them back, once the store confirms it holds exactly those spans (one id query instead of reading
    the whole trace back). When it does not (spans dropped on the way, spans another process added to the
    trace, the ingest busy or failed), the replay is loaded from the store; when the store does not have it
    (the exporter sends elsewhere, OTLP to a Collector), it is rebuilt from the spans this process saw."""
    if trace_id is None:
        return None
    if store is None:
        return _build(spans)
    records = stored_records(spans)
    if records is not None and _store_holds(store, trace_id, records):
        try:
            return build_run(records, trace_id=trace_id)
        except OtelReplayError:
            pass  # the store's copy reads the same and fails the same way: fall through to the usual path
    try:
        stored: Run = store.load_run(trace_id)
    except OtelReplayError:
        return _build(spans)
    return stored


def _store_holds(store: Any, trace_id: str, records: list[SpanRecord]) -> bool:
    """True when the store holds exactly the spans of ``records`` for ``trace_id``, no more and no fewer."""
    try:
        stored = store.existing_span_ids([trace_id])
    except Exception:  # noqa: BLE001 - the check failing only means the slower path
        return False
    return len(stored) == len(records) and stored == {(r.trace_id, r.span_id) for r in records}


def _build(spans: list[ReadableSpan]) -> Run | None:
    if not spans:
        return None
    try:
        return build_run(records_from_spans(spans))
    except OtelReplayError:
        return None


def stored_records(spans: list[ReadableSpan]) -> list[SpanRecord] | None:
    """The records :meth:`Store.load_spans <otel_replay.storage.store.Store.load_spans>` returns for ``spans``
    once they are stored, in its order (oldest first, then by span id), or None when a span cannot be encoded:
    the one span encoder's rows, read back as the store reads them."""
    try:
        records = records_from_spans(spans, as_stored=True)
    except Exception:  # noqa: BLE001 - the store's copy is then the one to read
        return None
    records.sort(key=_stored_order)
    return records
