"""Which dialect a span was written in, which span of a foreign trace is its root, and the run summary read
from that root.

It must never read a store or import an instrumentation package.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from .. import semconv
from ..records import SpanRecord
from ..run_model import RunSummary
from .keys import (
    AGENT_OPS,
    DIALECT_GENAI,
    DIALECT_OPENINFERENCE,
    DIALECT_OTEL_REPLAY,
    DIALECT_TRACELOOP,
    GENAI_OPERATION,
    MODEL_OPS,
    OI_KINDS,
    OI_SPAN_KIND,
    TRACELOOP_KINDS,
    TRACELOOP_REQUEST_TYPE,
    TRACELOOP_SPAN_KIND,
    first,
)

# ------------------------------------------------------------------------------------------ dialects


def span_dialect(span: SpanRecord) -> str | None:
    """The dialect a span was written in, or None (otel-replay's own spans and non-GenAI spans)."""
    attrs = span.span_attributes
    if semconv.STEP_INDEX in attrs or semconv.RUN_ID in attrs:
        return DIALECT_OTEL_REPLAY
    if OI_SPAN_KIND in attrs:
        return DIALECT_OPENINFERENCE
    if (
        TRACELOOP_SPAN_KIND in attrs
        or TRACELOOP_REQUEST_TYPE in attrs
        or "traceloop.entity.name" in attrs
        or "gen_ai.prompt.0.role" in attrs
        or "gen_ai.prompt.0.content" in attrs
        or "gen_ai.completion.0.role" in attrs
    ):
        return DIALECT_TRACELOOP
    if GENAI_OPERATION in attrs:
        return DIALECT_GENAI
    return None


def step_kind(span: SpanRecord, dialect: str | None) -> str | None:
    """``model``, ``tool``, ``retrieval``, ``agent`` or None (a container such as a chain or workflow)."""
    attrs = span.span_attributes
    if dialect == DIALECT_OPENINFERENCE:
        return OI_KINDS.get(attrs.get(OI_SPAN_KIND, "").upper())
    if dialect == DIALECT_TRACELOOP:
        if TRACELOOP_REQUEST_TYPE in attrs or "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs:
            return "model"
        kind = TRACELOOP_KINDS.get(attrs.get(TRACELOOP_SPAN_KIND, ""))
        if kind is not None:
            return kind
    op = attrs.get(GENAI_OPERATION)
    if op in MODEL_OPS:
        return "model"
    if op == "execute_tool":
        return "tool"
    if op == "retrieval":
        return "retrieval"
    if op in AGENT_OPS:
        return "agent"
    return None


def find_foreign_root(spans: Sequence[SpanRecord]) -> SpanRecord | None:
    """The root of a run recorded by another instrumentation: the earliest parentless span written in a
    GenAI dialect (else the earliest span whose parent is not in the trace, for a trace cut short)."""
    roots = [s for s in spans if not s.parent_span_id and span_dialect(s) not in (None, DIALECT_OTEL_REPLAY)]
    if not roots:
        ids = {s.span_id for s in spans}
        roots = [
            s
            for s in spans
            if s.parent_span_id and s.parent_span_id not in ids and span_dialect(s) not in (None, DIALECT_OTEL_REPLAY)
        ]
    return min(roots, key=lambda s: (s.timestamp_ns, s.span_id)) if roots else None


def _agent_name(root: SpanRecord) -> str:
    attrs = root.span_attributes
    name = first(attrs, semconv.GEN_AI_AGENT_NAME, "traceloop.workflow.name", "traceloop.entity.name", "agent.name")
    if name:
        return name
    for prefix in ("invoke_agent ", "invoke_workflow ", "create_agent "):
        if root.span_name.startswith(prefix):
            return root.span_name[len(prefix) :].strip()
    return root.span_name


def summary_from_root(root: SpanRecord, *, step_count: int | None = None) -> RunSummary:
    """The ``RunSummary`` of a foreign run from its root span (kind ``original``, no run id)."""
    return RunSummary(
        trace_id=root.trace_id,
        run_id="",
        agent=_agent_name(root),
        status="error" if root.is_error else "ok",
        started_at=_dt.datetime.fromtimestamp(root.timestamp_ns / 1e9, tz=_dt.timezone.utc),
        duration_ms=root.duration_ns / 1e6,
        kind=semconv.RunKind.ORIGINAL.value,
        replay_of=None,
        service_name=root.service_name,
        step_count=step_count,
        dialect=span_dialect(root) or DIALECT_GENAI,
    )
