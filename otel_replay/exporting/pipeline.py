"""The processors behind otel-replay's one processor on a provider: ``Router`` (each span to the pipeline of
the runtime active where it started, else the default's), ``Pipeline`` (one runtime's: scrub the span once,
then its batch processor and taps) and ``DeliveryWatch`` (the exporter wrapper that remembers failed batches
and warns once when exports start or stop failing).

It must never raise into the host program, export a span it failed to scrub, or hold a runtime: each
processor belongs to the runtime that built it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..forks import after_fork_in_child
from ..redaction import Redactor
from ..runtime import in_context
from .scrubbing import scrub_span

_log = logging.getLogger("otel_replay")


class Pipeline(SpanProcessor):
    """The span processor of one runtime: scrubs each ended span once, then hands it to the runtime's batch
    processor (its exporter) and to the taps."""

    def __init__(self, inner: SpanProcessor | None, redactor: Redactor) -> None:
        self.inner = inner
        self.taps: tuple[Callable[[ReadableSpan], None], ...] = ()
        self.redactor = redactor
        self._resources: dict[int, Any] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        inner = self.inner
        if inner is not None:
            inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            span = scrub_span(span, self.redactor, self._resources)
        except Exception:  # noqa: BLE001 - a span that could not be scrubbed is not exported
            _log.warning("otel-replay: could not scrub a span; it is not exported", exc_info=True)
            return
        inner = self.inner
        if inner is not None:
            inner.on_end(span)
        for tap in self.taps:
            try:
                tap(span)
            except Exception:  # noqa: BLE001 - a tap never breaks the export path
                _log.exception("otel-replay: span tap failed")

    def shutdown(self) -> None:
        inner, self.inner = self.inner, None
        if inner is not None:
            inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        inner = self.inner
        return True if inner is None else inner.force_flush(timeout_millis)


class Router(SpanProcessor):
    """otel-replay's one processor on a provider: each span goes to the pipeline of the runtime active in the
    context that started it, else to the default runtime's pipeline (the one :func:`configure` set)."""

    def __init__(self) -> None:
        self.default: Pipeline | None = None
        self._owners: dict[int, Pipeline] = {}  # span id -> pipeline, for spans started under another runtime

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pipeline = self.default
        rt = in_context()
        if rt is not None:
            own = rt.processor
            if isinstance(own, Pipeline) and own is not pipeline:
                pipeline = own
                self._owners[span.context.span_id] = own
        if pipeline is not None:
            pipeline.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        pipeline = self.default
        if self._owners:
            context = span.context
            if context is not None:
                pipeline = self._owners.pop(context.span_id, pipeline)
        if pipeline is not None:
            pipeline.on_end(span)

    def shutdown(self) -> None:
        pipeline = self.default
        if pipeline is not None:
            pipeline.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        pipeline = self.default
        return True if pipeline is None else pipeline.force_flush(timeout_millis)


class DeliveryWatch(SpanExporter):
    """Forwards to the chosen exporter and remembers what it failed to deliver.

    :func:`flush` reports False when any batch failed since the previous flush (the SDK's ``BatchSpanProcessor``
    itself only says whether its queue was drained). For exporters that are not otel-replay's own (OTLP, an
    exporter passed to :func:`configure`), whose failures are otherwise logged only by the exporter itself, it
    tells the user on the ``otel_replay`` logger: one warning when exports start failing, one when they work
    again. Never raises.
    """

    def __init__(self, inner: SpanExporter, name: str, *, warn: bool) -> None:
        self.inner = inner
        self.name = name
        self.warn = warn
        self._mutex = threading.Lock()
        after_fork_in_child(self._after_fork_in_child)  # held weakly: a dropped watch is collected
        self._failed_since_flush = False
        self._failing_spans = 0  # spans not delivered in the current streak of failures

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - the telemetry path never raises into the host program
            _log.exception("otel-replay: the %s exporter raised; %d span(s) not exported", self.name, len(spans))
            result = SpanExportResult.FAILURE
        with self._mutex:
            failing_before = self._failing_spans
            if result is SpanExportResult.SUCCESS:
                self._failing_spans = 0
            else:
                self._failed_since_flush = True
                self._failing_spans += len(spans)
        if self.warn and result is not SpanExportResult.SUCCESS and not failing_before:
            _log.warning(
                "otel-replay: the %s exporter could not export %d span(s); the agent goes on, and spans "
                "are dropped until the exporter works again (see the exporter's own messages)",
                self.name,
                len(spans),
            )
        elif self.warn and result is SpanExportResult.SUCCESS and failing_before:
            _log.warning(
                "otel-replay: the %s exporter works again; %d span(s) were not exported", self.name, failing_before
            )
        return result

    def _after_fork_in_child(self) -> None:
        self._mutex = threading.Lock()  # a thread of the parent may have held it at the fork

    def take_failed(self) -> bool:
        """True when an export failed since the last call (and resets that)."""
        with self._mutex:
            failed, self._failed_since_flush = self._failed_since_flush, False
        return failed

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.inner.shutdown()
