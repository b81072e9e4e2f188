"""The run model: the frozen objects a run is rebuilt into (:class:`Run`, its :class:`Step` and
:class:`Snapshot` objects, the :class:`RunSummary` of a listing).

Why it exists: :mod:`otel_replay.runs` builds these objects from otel-replay's own spans, and
:mod:`otel_replay.dialects` builds them from the spans of other GenAI instrumentations; both readers sit above
this module, so the model depends on neither and the import graph goes one way.

What it must never do: read a store, decode snapshot events, or import :mod:`otel_replay.runs`,
:mod:`otel_replay.dialects` or anything above them; it holds data and its JSON-ready forms only.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from . import semconv
from .records import EventRecord, SpanRecord
from .records import stored_int as _int

__all__ = ["Run", "RunSummary", "Snapshot", "Step", "span_error"]


def _iso(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc).isoformat(timespec="microseconds")


def span_status(span: SpanRecord) -> str:
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
            "index": self.index,
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "attempt": self.attempt,
            "started_at": _iso(self.start_ns),
            "duration_ms": round(self.duration_ms, 3),
            "attributes": dict(self.attributes),
            "error": self.error,
            "snapshots": self.snapshots,
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
        """Summary of a run from its otel-replay root span alone (:func:`otel_replay.runs.summary_of` also reads
        the root of another GenAI instrumentation)."""
        attrs = root.span_attributes
        name = attrs.get(semconv.GEN_AI_AGENT_NAME) or root.span_name.removeprefix(semconv.SPAN_AGENT).strip()
        return cls(
            trace_id=root.trace_id,
            run_id=attrs.get(semconv.RUN_ID, ""),
            agent=name,
            status=span_status(root),
            started_at=_dt.datetime.fromtimestamp(root.timestamp_ns / 1e9, tz=_dt.timezone.utc),
            duration_ms=root.duration_ns / 1e6,
            kind=attrs.get(semconv.RUN_KIND) or semconv.RunKind.ORIGINAL.value,
            replay_of=attrs.get(semconv.REPLAY_OF_TRACE_ID) or None,
            service_name=root.service_name,
            step_count=_int(attrs.get(semconv.RUN_STEP_COUNT)),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the items of ``otel-replay runs --json``)."""
        return {
            "trace_id": self.trace_id,
            "run_id": self.run_id,
            "agent": self.agent,
            "status": self.status,
            "started_at": self.started_at.isoformat(timespec="microseconds"),
            "duration_ms": round(self.duration_ms, 3),
            "kind": self.kind,
            "replay_of": self.replay_of,
            "service_name": self.service_name,
            "step_count": self.step_count,
            "dialect": self.dialect,
        }


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
        out.update(
            {
                "entrypoint": self.entrypoint,
                "schema_version": self.schema_version,
                "attributes": dict(self.attributes),
                "snapshots": self.snapshots,
                "steps": [s.to_dict() for s in self.steps],
                "timeline": [
                    {"seq": s.seq, "kind": s.kind, "step_index": s.step_index, "at": _iso(s.timestamp_ns)}
                    for s in self.timeline
                ],
                "problems": list(self.problems),
                "dialect": self.dialect,
            }
        )
        return out


def span_error(span: SpanRecord) -> dict[str, str] | None:
    """``{type, message}`` of a failed span: its exception event, else its ``error.type`` and status message;
    None when it did not fail."""
    for event in span.events:
        if event.name == semconv.EXCEPTION_EVENT:
            return {
                "type": event.attributes.get(semconv.EXCEPTION_TYPE, ""),
                "message": event.attributes.get(semconv.EXCEPTION_MESSAGE, ""),
            }
    if span.is_error:
        return {"type": span.span_attributes.get(semconv.ERROR_TYPE, ""), "message": span.status_message}
    return None
