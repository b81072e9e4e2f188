"""Test helpers for users of otel-replay: record runs in memory and read them back as :class:`Run` objects.

    from otel_replay.testing import capture

    def test_my_agent(tmp_path):
        with capture(home=tmp_path) as recorded:
            my_agent("question")
        (run,) = recorded.runs()
        assert run.steps[0].kind == "retrieval"

The spans go through the same OTLP → row mapping the store uses, so what a test sees is what
``otel-replay show`` would show; nothing touches disk except the redaction key in ``home``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .exporting import setup
from .exporting.rows import records_from_spans
from .records import SpanRecord
from .runs import Run, build_run, find_root


@dataclass(frozen=True)
class Recorded:
    """What :func:`capture` recorded."""

    exporter: InMemorySpanExporter

    def records(self) -> list[SpanRecord]:
        """Every finished span, as the store would hold it."""
        setup.flush()
        spans = self.exporter.get_finished_spans()
        return records_from_spans(spans)

    def runs(self) -> list[Run]:
        """Every complete run, oldest first."""
        by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
        for record in self.records():
            by_trace[record.trace_id].append(record)
        runs = [build_run(spans) for spans in by_trace.values() if find_root(spans) is not None]
        return sorted(runs, key=lambda r: r.summary.started_at)


@contextmanager
def capture(*, home: str | os.PathLike[str]) -> Iterator[Recorded]:
    """Record into memory what runs inside the block: its context, and the threads and tasks that inherit it
    (start a plain thread with ``contextvars.copy_context().run``). The block has a runtime of its own, so the
    application's configuration is neither changed nor restored, and other threads record as before."""
    exporter = InMemorySpanExporter()
    with setup.exporting_to(exporter, home=home):
        yield Recorded(exporter)
