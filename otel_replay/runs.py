"""Runs rebuilt from stored spans: the tree a user shows, a replay walks and a diff compares.

:func:`build_run` takes every :class:`~otel_replay.records.SpanRecord` of one trace and returns a frozen
:class:`Run`: its run-level snapshots, its steps in step order with their snapshots, and a list of
integrity problems (a chunk missing, a hash that does not match, a truncated payload). It reads only what
is stored, so runs written by the Collector's exporter and by otel-replay's own ingest read alike. It never
changes what it reads.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import semconv
from .errors import OtelReplayError, TraceNotFoundError
from .records import EventRecord, SpanRecord
from .records import stored_int as _int
from .snapshots import TRUNCATED_TAG, sha256_hex


def _iso(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc).isoformat(timespec="microseconds")


def _status(span: SpanRecord) -> str:
    return "error" if span.is_error else "ok"


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """One snapshot, its chunks joined and its payload decoded."""

    kind: str
    seq: int
    span_id: str
    step_index: int | None
    timestamp_ns: int
    payload: Any
    sha256: str
    size: int
    truncated: bool
    redactions: int
    intact: bool
    """True when every chunk is present and the joined payload matches its sha256."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kind": self.kind, "seq": self.seq, "step_index": self.step_index, "span_id": self.span_id,
                "at": _iso(self.timestamp_ns), "sha256": self.sha256, "size": self.size,
                "truncated": self.truncated, "redactions": self.redactions, "intact": self.intact,
                "payload": self.payload}


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of a run (a model, tool, retrieval or nested agent call)."""

    index: int
    kind: str
    name: str
    status: str
    span_id: str
    parent_span_id: str
    attempt: int
    start_ns: int
    duration_ns: int
    attributes: dict[str, str]
    snapshot_list: tuple[Snapshot, ...] = ()
    events: tuple[EventRecord, ...] = ()
    error: dict[str, str] | None = None

    @property
    def snapshots(self) -> dict[str, Any]:
        """Decoded payload of each snapshot kind of this step (the last one where a kind repeats)."""
        return {s.kind: s.payload for s in self.snapshot_list}

    @property
    def duration_ms(self) -> float:
        """Duration in milliseconds."""
        return self.duration_ns / 1e6

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the ``steps`` items of ``otel-replay show --json``)."""
        return {
            "index": self.index, "kind": self.kind, "name": self.name, "status": self.status,
            "span_id": self.span_id, "parent_span_id": self.parent_span_id, "attempt": self.attempt,
            "started_at": _iso(self.start_ns), "duration_ms": round(self.duration_ms, 3),
            "attributes": dict(self.attributes), "error": self.error, "snapshots": self.snapshots,
        }


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """One line of ``otel-replay runs``."""

    trace_id: str
    run_id: str
    agent: str
    status: str
    started_at: _dt.datetime
    duration_ms: float
    kind: str
    replay_of: str | None
    service_name: str = ""
    step_count: int | None = None
    dialect: str = "otel_replay"
    """Who recorded the run: ``otel_replay``, or the GenAI dialect of another instrumentation (``genai``,
    ``openinference``, ``traceloop``) read by :mod:`otel_replay.dialects`."""

    @classmethod
    def from_root(cls, root: SpanRecord) -> RunSummary:
        """Summary of a run from its root span alone (a foreign root is read by :mod:`otel_replay.dialects`)."""
        attrs = root.span_attributes
        if semconv.RUN_ID not in attrs:
            from . import dialects

            if dialects.span_dialect(root) not in (None, dialects.DIALECT_OTEL_REPLAY):
                foreign: RunSummary = dialects.summary_from_root(root)
                return foreign
        name = attrs.get(semconv.GEN_AI_AGENT_NAME) or root.span_name.removeprefix(semconv.SPAN_AGENT).strip()
        return cls(
            trace_id=root.trace_id,
            run_id=attrs.get(semconv.RUN_ID, ""),
            agent=name,
            status=_status(root),
            started_at=_dt.datetime.fromtimestamp(root.timestamp_ns / 1e9, tz=_dt.timezone.utc),
            duration_ms=root.duration_ns / 1e6,
            kind=attrs.get(semconv.RUN_KIND) or semconv.RunKind.ORIGINAL.value,
            replay_of=attrs.get(semconv.REPLAY_OF_TRACE_ID) or None,
            service_name=root.service_name,
            step_count=_int(attrs.get(semconv.RUN_STEP_COUNT)),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the items of ``otel-replay runs --json``)."""
        return {"trace_id": self.trace_id, "run_id": self.run_id, "agent": self.agent, "status": self.status,
                "started_at": self.started_at.isoformat(timespec="microseconds"),
                "duration_ms": round(self.duration_ms, 3), "kind": self.kind, "replay_of": self.replay_of,
                "service_name": self.service_name, "step_count": self.step_count, "dialect": self.dialect}


@dataclass(frozen=True, kw_only=True)
class Run:
    """A run rebuilt from its trace."""

    summary: RunSummary
    entrypoint: str | None
    schema_version: str | None
    attributes: dict[str, str]
    snapshot_list: tuple[Snapshot, ...]
    steps: tuple[Step, ...]
    spans: tuple[SpanRecord, ...] = field(repr=False)
    problems: tuple[str, ...] = ()
    dialect: str = "otel_replay"
    """``otel_replay`` for a run recorded by otel-replay; else the GenAI dialect of the instrumentation that
    recorded it (``genai``, ``openinference``, ``traceloop``), whose spans :mod:`otel_replay.dialects` read
    into steps and snapshots as far as their content allows."""

    # summary fields, spelled out for convenience
    @property
    def trace_id(self) -> str:
        """Trace id (32 lowercase hex)."""
        return self.summary.trace_id

    @property
    def run_id(self) -> str:
        """Run id."""
        return self.summary.run_id

    @property
    def agent(self) -> str:
        """Agent name."""
        return self.summary.agent

    @property
    def status(self) -> str:
        """``ok`` or ``error``."""
        return self.summary.status

    @property
    def snapshots(self) -> dict[str, Any]:
        """Decoded payload of each run-level snapshot kind (the last one where a kind repeats)."""
        return {s.kind: s.payload for s in self.snapshot_list}

    @property
    def timeline(self) -> list[Snapshot]:
        """Every snapshot of the run, run-level and step-level, in recording order."""
        all_snaps = list(self.snapshot_list) + [s for step in self.steps for s in step.snapshot_list]
        return sorted(all_snaps, key=lambda s: (s.seq, s.timestamp_ns))

    def step(self, index: int) -> Step:
        """The step with this index."""
        for step in self.steps:
            if step.index == index:
                return step
        raise KeyError(index)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``otel-replay show --json``)."""
        out = self.summary.to_dict()
        out.update({
            "entrypoint": self.entrypoint,
            "schema_version": self.schema_version,
            "attributes": dict(self.attributes),
            "snapshots": self.snapshots,
            "steps": [s.to_dict() for s in self.steps],
            "timeline": [{"seq": s.seq, "kind": s.kind, "step_index": s.step_index, "at": _iso(s.timestamp_ns)}
                         for s in self.timeline],
            "problems": list(self.problems),
            "dialect": self.dialect,
        })
        return out


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
        kind = key[0][len(prefix):]
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
            payload: Any = json.loads(text) if text else None
        except ValueError:
            payload = None
            intact = False
            problems.append(f"{where}: {kind} snapshot is not valid JSON")
        truncated = first.get(semconv.SNAPSHOT_TRUNCATED) == "true" or (
            isinstance(payload, dict) and payload.get(TRUNCATED_TAG) is True)
        if truncated:
            problems.append(f"{where}: {kind} snapshot was truncated at the size cap")
        out.append(Snapshot(
            kind=kind, seq=_int(first.get(semconv.SNAPSHOT_SEQ), -1) or 0, span_id=span.span_id,
            step_index=step_index, timestamp_ns=events[0].timestamp_ns, payload=payload, sha256=digest,
            size=_int(first.get(semconv.SNAPSHOT_SIZE), len(text)) or 0, truncated=truncated,
            redactions=_int(first.get(semconv.SNAPSHOT_REDACTIONS), 0) or 0, intact=intact,
        ))
    return tuple(out)


def span_error(span: SpanRecord) -> dict[str, str] | None:
    """``{type, message}`` of a failed span: its exception event, else its ``error.type`` and status message;
    None when it did not fail."""
    for event in span.events:
        if event.name == semconv.EXCEPTION_EVENT:
            return {"type": event.attributes.get(semconv.EXCEPTION_TYPE, ""),
                    "message": event.attributes.get(semconv.EXCEPTION_MESSAGE, "")}
    if span.is_error:
        return {"type": span.span_attributes.get(semconv.ERROR_TYPE, ""), "message": span.status_message}
    return None


def find_root(spans: Sequence[SpanRecord]) -> SpanRecord | None:
    """The run's root span: the earliest parentless span carrying a run id."""
    roots = [s for s in spans if not s.parent_span_id and semconv.RUN_ID in s.span_attributes]
    return min(roots, key=lambda s: s.timestamp_ns) if roots else None


def build_run(spans: Iterable[SpanRecord], *, trace_id: str | None = None) -> Run:
    """Rebuild the run recorded in one trace's spans.

    A trace with no otel-replay run root but spans of another GenAI instrumentation (OpenTelemetry GenAI
    conventions, OpenInference, OpenLLMetry) is read by :func:`otel_replay.dialects.build_foreign_run`.
    Raises :class:`TraceNotFoundError` for no spans, and :class:`OtelReplayError` when the trace holds
    neither (a run still in progress, or spans recorded by something else).
    """
    spans = tuple(spans)
    if not spans:
        raise TraceNotFoundError(f"no run with trace id {trace_id} in the store; list runs with `otel-replay runs`")
    root = find_root(spans)
    tid = trace_id or spans[0].trace_id
    if root is None:
        from . import dialects

        if dialects.find_foreign_root(spans) is not None:
            foreign_run: Run = dialects.build_foreign_run(spans, trace_id=tid)
            return foreign_run
        raise OtelReplayError(
            f"trace {tid} has {len(spans)} spans but no otel-replay run root: the run may still be in progress "
            "(call otel_replay.flush() in the agent) or was recorded by an instrumentation whose spans otel-replay "
            "does not read (docs/dialects.md lists those it does)")
    problems: list[str] = []
    steps: list[Step] = []
    for span in spans:
        index = _int(span.span_attributes.get(semconv.STEP_INDEX))
        if index is None or span is root:
            continue
        attrs = span.span_attributes
        steps.append(Step(
            index=index, kind=attrs.get(semconv.STEP_KIND, ""), name=attrs.get(semconv.STEP_NAME, span.span_name),
            status=_status(span), span_id=span.span_id, parent_span_id=span.parent_span_id,
            attempt=_int(attrs.get(semconv.STEP_ATTEMPT), 1) or 1, start_ns=span.timestamp_ns,
            duration_ns=span.duration_ns, attributes=dict(attrs), snapshot_list=_snapshots(span, index, problems),
            events=tuple([e for e in span.events if not e.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX)]),
            error=span_error(span),
        ))
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
        summary=RunSummary.from_root(root),
        entrypoint=root.span_attributes.get(semconv.RUN_ENTRYPOINT),
        schema_version=root.span_attributes.get(semconv.SCHEMA_VERSION_ATTR),
        attributes=dict(root.span_attributes),
        snapshot_list=_snapshots(root, None, problems),
        steps=tuple(steps),
        spans=spans,
        problems=tuple(problems),
    )
