"""``build_foreign_run``: a whole foreign trace read into a :class:`~otel_replay.run_model.Run` (the root's input and
output, its steps in order, their attempts).

It must never change, store or write anything: it only reads :class:`SpanRecord` objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from .. import semconv
from ..errors import OtelReplayError, TraceNotFoundError
from ..records import EventRecord, SpanRecord
from ..run_model import Run, Snapshot, Step, span_error
from ..snapshots import canonical_json, sha256_hex
from .calls import model_call
from .detect import find_foreign_root, span_dialect, step_kind, summary_from_root
from .keys import (
    DIALECT_GENAI,
    DIALECT_OPENINFERENCE,
    DIALECT_OTEL_REPLAY,
    DIALECT_TRACELOOP,
    GENAI_INFERENCE_EVENT,
    GENAI_INPUT_MESSAGES,
    GENAI_LEGACY_COMPLETION_EVENT,
    GENAI_LEGACY_PROMPT_EVENT,
    GENAI_OUTPUT_MESSAGES,
    json_or_none,
    parse_json,
)
from .messages import from_genai_parts
from .steps import Pending, model_step, retrieval_step, step_name, tool_step

# --------------------------------------------------------------------------------------- run-level io


def _root_io(root: SpanRecord, dialect: str) -> tuple[Any, bool, Any, bool]:
    """The root's input and output values, each with whether it was recorded."""
    attrs = root.span_attributes
    if dialect == DIALECT_OPENINFERENCE:

        def value(prefix: str) -> tuple[Any, bool]:
            raw = attrs.get(prefix + ".value")
            if raw is None:
                return None, False
            return (raw if attrs.get(prefix + ".mime_type") != "application/json" else parse_json(raw)), True

        inp, has_in = value("input")
        out, has_out = value("output")
        return inp, has_in, out, has_out
    if dialect == DIALECT_TRACELOOP and ("traceloop.entity.input" in attrs or "traceloop.entity.output" in attrs):
        return (
            parse_json(attrs.get("traceloop.entity.input")),
            "traceloop.entity.input" in attrs,
            parse_json(attrs.get("traceloop.entity.output")),
            "traceloop.entity.output" in attrs,
        )
    inp = json_or_none(attrs.get(GENAI_INPUT_MESSAGES))
    out = json_or_none(attrs.get(GENAI_OUTPUT_MESSAGES))
    return inp, inp is not None, out, out is not None


def _input_payload(value: Any, dialect: str) -> dict[str, Any]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if dialect == DIALECT_TRACELOOP and isinstance(value, dict) and set(value) <= {"args", "kwargs"}:
        args = list(value.get("args") or [])
        kwargs = dict(value.get("kwargs") or {})
    elif dialect == DIALECT_GENAI and isinstance(value, list):
        users = [m for m in from_genai_parts(value) or [] if m.get("role") == "user"]
        if len(value) == 1 and len(users) == 1 and isinstance(users[0].get("content"), str):
            args = [users[0]["content"]]
        else:
            args = [value]
    elif dialect == DIALECT_OPENINFERENCE and isinstance(value, dict):
        kwargs = value
    elif value is not None:
        args = [value]
    return {
        "entrypoint": "",
        "script": None,
        "args": args,
        "kwargs": kwargs,
        "input": value,
        "files": [],
        "session": None,
        "tenant": None,
        "role": None,
        "dialect": dialect,
    }


def _output_payload(value: Any, dialect: str, error: dict[str, str] | None) -> dict[str, Any]:
    answer: Any = None
    structured: Any = None
    if dialect == DIALECT_GENAI and isinstance(value, list):
        outputs = from_genai_parts(value) or []
        texts = [m.get("content") for m in outputs if isinstance(m.get("content"), str)]
        answer = texts[-1] if texts else None
        structured = None if answer is not None else value
    elif isinstance(value, str):
        answer = value
    elif value is not None:
        structured = value
        if isinstance(value, dict):
            for key in ("answer", "output", "final_answer", "text", "content", "response"):
                if isinstance(value.get(key), str):
                    answer = value[key]
                    break
    citations = value.get("citations") if isinstance(value, dict) else None
    return {
        "answer": answer,
        "structured": structured,
        "citations": citations,
        "safety": None,
        "error": error,
        "dialect": dialect,
    }


# ------------------------------------------------------------------------------------------- the run


def _is_descendant(span: SpanRecord, root: SpanRecord, parents: Mapping[str, str]) -> bool:
    seen: set[str] = set()
    current = span.parent_span_id
    while current and current not in seen:
        if current == root.span_id:
            return True
        seen.add(current)
        current = parents.get(current, "")
    return False


def _one_step_per_call(
    candidates: list[tuple[SpanRecord, str, str]], parents: Mapping[str, str]
) -> list[tuple[SpanRecord, str, str]]:
    """One step per model call, though two instrumentations recorded it: a model span inside another (a provider
    SDK's own span inside an instrumentation's, as ``@anthropic-ai/sdk`` 1.x writes ``anthropic.messages.create``
    under OpenLLMetry's ``chat`` span) is the same call. Of the two, the one that holds the messages is kept (the
    outer one when both or neither do)."""
    models = {span.span_id: (span, dialect) for span, kind, dialect in candidates if kind == "model"}
    dropped: set[str] = set()
    for span, dialect in models.values():
        outer, current, seen = None, span.parent_span_id, set()
        while current and current not in seen and outer is None:
            seen.add(current)
            outer = models.get(current)
            current = parents.get(current, "")
        if outer is None:
            continue
        inner_content = model_call(span, dialect).messages is not None
        outer_content = model_call(*outer).messages is not None
        dropped.add(outer[0].span_id if inner_content and not outer_content else span.span_id)
    return [c for c in candidates if c[0].span_id not in dropped]


def build_foreign_run(spans: Iterable[SpanRecord], *, trace_id: str | None = None) -> Run:
    """Rebuild a run recorded by another GenAI instrumentation into a :class:`~otel_replay.runs.Run`.

    Steps are the root's descendants (and the root itself when it is a single model, tool or retrieval
    call) that the dialect marks as model, tool, retrieval or agent calls, numbered in start order.
    Snapshots are built from the content the spans carry; a call recorded without content gets a snapshot
    with ``content_captured`` false and an empty request / arguments (no request hash). Raises
    :class:`~otel_replay.errors.OtelReplayError` when no span is written in a known dialect.
    """
    spans = tuple(spans)
    if not spans:
        raise TraceNotFoundError(f"no run with trace id {trace_id} in the store; list runs with `otel-replay runs`")
    root = find_foreign_root(spans)
    tid = trace_id or spans[0].trace_id
    if root is None:
        raise OtelReplayError(
            f"trace {tid} has {len(spans)} spans but no run root: neither an otel-replay run nor GenAI spans "
            "(OpenTelemetry GenAI, OpenInference, OpenLLMetry) this reader knows; the run may still be in "
            "progress (call otel_replay.flush() in the agent)"
        )
    dialect = span_dialect(root) or DIALECT_GENAI
    parents = {s.span_id: s.parent_span_id for s in spans}
    candidates: list[tuple[SpanRecord, str, str]] = []
    for span in spans:
        span_dialect_ = span_dialect(span)
        if span_dialect_ in (None, DIALECT_OTEL_REPLAY):
            continue
        kind = step_kind(span, span_dialect_)
        if kind is None or (span is root and kind == "agent"):
            continue
        if span is not root and not _is_descendant(span, root, parents):
            continue
        candidates.append((span, kind, span_dialect_))
    candidates = _one_step_per_call(candidates, parents)
    candidates.sort(key=lambda c: (c[0].timestamp_ns, c[0].end_ns, c[0].span_id))
    pending: list[Pending] = []
    raw_steps: list[tuple[SpanRecord, str, str, dict[str, str]]] = []
    for index, (span, kind, d) in enumerate(candidates):
        name = step_name(span, kind, d)
        derived: dict[str, str] = {}
        payload: dict[str, Any] | None = None
        if kind == "model":
            payload = model_step(span, d, name, derived)
        elif kind == "tool":
            payload = tool_step(span, d, name, derived)
        elif kind == "retrieval":
            payload = retrieval_step(span, d, name, derived)
        if payload is not None:
            pending.append(
                Pending(kind=kind, span_id=span.span_id, step_index=index, timestamp_ns=span.end_ns, payload=payload)
            )
        raw_steps.append((span, kind, name, derived))
    root_is_step = any(span is root for span, *_ in raw_steps)
    if not root_is_step:
        inp, has_in, out, has_out = _root_io(root, dialect)
        if has_in:
            pending.append(
                Pending(
                    kind="input",
                    span_id=root.span_id,
                    step_index=None,
                    timestamp_ns=root.timestamp_ns,
                    payload=_input_payload(inp, dialect),
                )
            )
        error = span_error(root)
        if has_out or error is not None:
            pending.append(
                Pending(
                    kind="output",
                    span_id=root.span_id,
                    step_index=None,
                    timestamp_ns=root.end_ns,
                    payload=_output_payload(out, dialect, error),
                )
            )
    # snapshot order: by time (the input first); seq numbers them as the recorder would
    pending.sort(key=lambda p: (p.kind != "input", p.timestamp_ns, p.kind == "output"))
    snapshots: dict[tuple[str, int | None], list[Snapshot]] = {}
    for seq, item in enumerate(pending):
        text = canonical_json(item.payload)
        snapshot = Snapshot(
            kind=item.kind,
            seq=seq,
            span_id=item.span_id,
            step_index=item.step_index,
            timestamp_ns=item.timestamp_ns,
            payload=json.loads(text),
            sha256=sha256_hex(text),
            size=len(text.encode("utf-8")),
            truncated=False,
            redactions=0,
            intact=True,
        )
        snapshots.setdefault((item.span_id, item.step_index), []).append(snapshot)
    steps = []
    for index, (span, kind, name, derived) in enumerate(raw_steps):
        attrs = dict(span.span_attributes)
        for key, value in derived.items():
            attrs.setdefault(key, value)
        steps.append(
            Step(
                index=index,
                kind=kind,
                name=name,
                status="error" if span.is_error else "ok",
                span_id=span.span_id,
                parent_span_id=span.parent_span_id,
                attempt=1,
                start_ns=span.timestamp_ns,
                duration_ns=span.duration_ns,
                attributes=attrs,
                snapshot_list=tuple(snapshots.get((span.span_id, index), ())),
                events=tuple(e for e in span.events if not _is_content_event(e)),
                error=span_error(span),
            )
        )
    _attempts(steps)
    root_attrs = dict(root.span_attributes)
    usage = [s.snapshots.get("model", {}).get("usage", {}) for s in steps if s.kind == "model"]
    for key, field in ((semconv.RUN_INPUT_TOKENS, "input_tokens"), (semconv.RUN_OUTPUT_TOKENS, "output_tokens")):
        values = [u[field] for u in usage if field in u]
        if values:
            root_attrs.setdefault(key, str(sum(values)))
    summary = summary_from_root(root, step_count=len(steps))
    return Run(
        summary=summary,
        entrypoint=None,
        # the run is translated into convention 1.0 objects by this reader; the dialect says where it came from
        schema_version=semconv.SCHEMA_VERSION,
        attributes=root_attrs,
        snapshot_list=tuple(snapshots.get((root.span_id, None), ())),
        steps=tuple(steps),
        spans=spans,
        problems=(),
        dialect=dialect,
    )


def _is_content_event(event: EventRecord) -> bool:
    return event.name in (GENAI_INFERENCE_EVENT, GENAI_LEGACY_PROMPT_EVENT, GENAI_LEGACY_COMPLETION_EVENT)


def _attempts(steps: list[Step]) -> None:
    """Attempt numbers as the recorder counts them: a step directly following failed attempts of the same kind
    and name under the same parent is attempt n + 1."""
    last: dict[str, tuple[str, str, int, bool]] = {}
    for i, step in enumerate(steps):
        previous = last.get(step.parent_span_id)
        attempt = 1
        if previous is not None and previous[:2] == (step.kind, step.name) and previous[3]:
            attempt = previous[2] + 1
        if attempt != step.attempt:
            steps[i] = replace(step, attempt=attempt)
        last[step.parent_span_id] = (step.kind, step.name, attempt, step.status == "error")
