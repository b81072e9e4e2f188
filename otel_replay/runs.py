"""Runs rebuilt from stored spans: the tree a user shows, a replay walks and a diff compares.

:func:`build_run` takes every :class:`~otel_replay.records.SpanRecord` of one trace and returns a frozen
:class:`Run`: its run-level snapshots, its steps in step order with their snapshots, and a list of
integrity problems (a chunk missing, a hash that does not match, a truncated payload). It reads only what
is stored, so runs written by the Collector's exporter and by otel-replay's own ingest read alike. It never
changes what it reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from . import dialects, semconv
from .errors import OtelReplayError, TraceNotFoundError
from .records import EventRecord, SpanRecord, one_per_span
from .records import stored_int as _int
from .run_model import Run, RunSummary, Snapshot, Step, span_error, span_status
from .snapshots import TRUNCATED_TAG, sha256_hex

__all__ = ["Run", "RunSummary", "Snapshot", "Step", "build_run", "find_root", "span_error", "summary_of"]

# the C scanner json.loads ends in, without its two whitespace matches (typeshed does not declare the attribute)
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads(text)``: a snapshot payload is compact JSON, read by the decoder's scanner directly; any
    other text (surrounding whitespace, extra data, not JSON) goes through ``json.loads`` and its errors."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _snapshots(span: SpanRecord, step_index: int | None, problems: list[str]) -> tuple[Snapshot, ...]:
    """Join chunks and decode the snapshot events of one span."""
    prefix = semconv.SNAPSHOT_EVENT_PREFIX
    groups: dict[tuple[str, str], list[EventRecord]] = {}  # in first-seen order
    for event in span.events:
        name = event.name
        if not name.startswith(prefix):
            continue
        key = (name, event.attributes.get(semconv.SNAPSHOT_SEQ) or f"t{event.timestamp_ns}")
        group = groups.get(key)
        if group is None:
            groups[key] = [event]
        else:
            group.append(event)
    if not groups:
        return ()
    out: list[Snapshot] = []
    where = f"step {step_index}" if step_index is not None else "run"
    for key, events in groups.items():
        kind = key[0][len(prefix) :]
        first = events[0].attributes
        count = _int(first.get(semconv.SNAPSHOT_CHUNK_COUNT), 1) or 1
        if len(events) == 1:  # the usual case: one chunk
            chunks = events
            text = first.get(semconv.SNAPSHOT_PAYLOAD, "")
        else:
            chunks = sorted(events, key=lambda e: _int(e.attributes.get(semconv.SNAPSHOT_CHUNK_INDEX), 0) or 0)
            text = "".join([e.attributes.get(semconv.SNAPSHOT_PAYLOAD, "") for e in chunks])
        digest = first.get(semconv.SNAPSHOT_SHA256, "")
        intact = len(chunks) == count and (not digest or sha256_hex(text) == digest)
        if len(chunks) != count:
            problems.append(f"{where}: {kind} snapshot has {len(chunks)} of {count} chunks")
        elif digest and not intact:
            problems.append(f"{where}: {kind} snapshot does not match its sha256")
        try:
            payload: Any = _loads(text) if text else None
        except ValueError:
            payload = None
            intact = False
            problems.append(f"{where}: {kind} snapshot is not valid JSON")
        truncated = first.get(semconv.SNAPSHOT_TRUNCATED) == "true" or (
            isinstance(payload, dict) and payload.get(TRUNCATED_TAG) is True
        )
        if truncated:
            problems.append(f"{where}: {kind} snapshot was truncated at the size cap")
        out.append(
            Snapshot(
                kind=kind,
                seq=_int(first.get(semconv.SNAPSHOT_SEQ), -1) or 0,
                span_id=span.span_id,
                step_index=step_index,
                timestamp_ns=events[0].timestamp_ns,
                payload=payload,
                sha256=digest,
                size=_int(first.get(semconv.SNAPSHOT_SIZE), len(text)) or 0,
                truncated=truncated,
                redactions=_int(first.get(semconv.SNAPSHOT_REDACTIONS), 0) or 0,
                intact=intact,
            )
        )
    return tuple(out)


def find_root(spans: Sequence[SpanRecord]) -> SpanRecord | None:
    """The run's root span: the earliest parentless span carrying a run id."""
    roots = [s for s in spans if not s.parent_span_id and semconv.RUN_ID in s.span_attributes]
    return min(roots, key=lambda s: s.timestamp_ns) if roots else None


def summary_of(root: SpanRecord) -> RunSummary:
    """Summary of a run from its root span alone: an otel-replay root, or the root of another GenAI
    instrumentation (read by :func:`otel_replay.dialects.summary_from_root`)."""
    if semconv.RUN_ID not in root.span_attributes and dialects.span_dialect(root) not in (
        None,
        dialects.DIALECT_OTEL_REPLAY,
    ):
        return dialects.summary_from_root(root)
    return RunSummary.from_root(root)


def build_run(spans: Iterable[SpanRecord], *, trace_id: str | None = None) -> Run:
    """Rebuild the run recorded in one trace's spans.

    A trace with no otel-replay run root but spans of another GenAI instrumentation (OpenTelemetry GenAI
    conventions, OpenInference, OpenLLMetry) is read by :func:`otel_replay.dialects.build_foreign_run`.
    Raises :class:`TraceNotFoundError` for no spans, and :class:`OtelReplayError` when the trace holds
    neither (a run still in progress, or spans recorded by something else). A span given more than once
    (rows delivered twice) counts once: the first copy is kept (:func:`~otel_replay.records.one_per_span`).
    """
    spans = tuple(one_per_span(spans))
    if not spans:
        raise TraceNotFoundError(f"no run with trace id {trace_id} in the store; list runs with `otel-replay runs`")
    root = find_root(spans)
    tid = trace_id or spans[0].trace_id
    if root is None:
        if dialects.find_foreign_root(spans) is not None:
            return dialects.build_foreign_run(spans, trace_id=tid)
        raise OtelReplayError(
            f"trace {tid} has {len(spans)} spans but no otel-replay run root: the run may still be in progress "
            "(call otel_replay.flush() in the agent) or was recorded by an instrumentation whose spans otel-replay "
            "does not read (docs/dialects.md lists those it does)"
        )
    problems: list[str] = []
    steps: list[Step] = []
    for span in spans:
        index = _int(span.span_attributes.get(semconv.STEP_INDEX))
        if index is None or span is root:
            continue
        attrs = span.span_attributes
        steps.append(
            Step(
                index=index,
                kind=attrs.get(semconv.STEP_KIND, ""),
                name=attrs.get(semconv.STEP_NAME, span.span_name),
                status=span_status(span),
                span_id=span.span_id,
                parent_span_id=span.parent_span_id,
                attempt=_int(attrs.get(semconv.STEP_ATTEMPT), 1) or 1,
                start_ns=span.timestamp_ns,
                duration_ns=span.duration_ns,
                attributes=dict(attrs),
                snapshot_list=_snapshots(span, index, problems),
                events=tuple([e for e in span.events if not e.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX)]),
                error=span_error(span),
            )
        )
    steps.sort(key=lambda s: (s.index, s.start_ns))
    seen: set[int] = set()
    for step in steps:
        if step.index in seen:
            problems.append(f"step index {step.index} appears more than once")
        seen.add(step.index)
    expected = _int(root.span_attributes.get(semconv.RUN_STEP_COUNT))
    if expected is not None and expected != len(steps):
        problems.append(f"run recorded {expected} steps but {len(steps)} are stored")
    return Run(
        summary=summary_of(root),
        entrypoint=root.span_attributes.get(semconv.RUN_ENTRYPOINT),
        schema_version=root.span_attributes.get(semconv.SCHEMA_VERSION_ATTR),
        attributes=dict(root.span_attributes),
        snapshot_list=_snapshots(root, None, problems),
        steps=tuple(steps),
        spans=spans,
        problems=tuple(problems),
    )
