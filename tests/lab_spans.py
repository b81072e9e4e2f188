"""Writing the ``otel_replay.lab`` span a lab leaves when it ends, as the lab runner writes it: a root span in a
trace of its own with the ``otel_replay.lab.*`` attributes (``otel_replay.semconv``), through the configured
exporter (the OTel SDK tracer of the current runtime). Used by the dashboard tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from opentelemetry.context import Context

from otel_replay import semconv
from otel_replay.exporting import setup


def write_lab_span(
    *,
    lab_id: str,
    mode: str,
    cohort: Sequence[str],
    runs: int,
    matched: int,
    diverged: int,
    failed: bool,
    scores: Mapping[str, float | None],
    start_time_ns: int | None = None,
) -> None:
    """One lab span, ended at once (call ``otel_replay.flush()`` and ingest to see it in the store); started at
    ``start_time_ns`` when given (ns since the epoch), else now."""
    tracer = setup.runtime().tracer
    span = tracer.start_span(semconv.LAB_SPAN_NAME, context=Context(), start_time=start_time_ns)
    span.set_attributes(
        {
            semconv.LAB_ID: lab_id,
            semconv.LAB_MODE: mode,
            semconv.LAB_COHORT: list(cohort),
            semconv.LAB_RUNS: runs,
            semconv.LAB_MATCHED: matched,
            semconv.LAB_DIVERGED: diverged,
            semconv.LAB_FAILED: failed,
            semconv.LAB_SCORES: json.dumps(dict(scores)),
        }
    )
    span.end(end_time=None if start_time_ns is None else start_time_ns + 1_000_000)
