"""A dry replay: :func:`readiness` (a recorded run's integrity and what each other mode still needs) and
the root span that records who looked, why and what the check found.

It must never run recorded code, call a model or tool, or read or write a store.
"""

from __future__ import annotations

import uuid
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import semconv
from ..exporting import setup
from ..markers import marker_paths
from ..runs import Run
from .answers import _captured
from .session import ReplaySession


def _has_marker(tree: Any) -> list[str]:
    """Paths of redaction markers in a recorded payload: marker objects and inline ``[REDACTED:…]`` tokens."""

    return marker_paths(tree)


def readiness(run: Run) -> dict[str, Any]:
    """Integrity and replay-readiness of a recorded run (what a dry replay reports)."""
    problems = list(run.problems)
    major = semconv.schema_major(run.schema_version or "")
    if major != semconv.SCHEMA_MAJOR:
        problems.append(
            f"recorded with convention {run.schema_version!r}; this otel-replay reads {semconv.SCHEMA_MAJOR}.x"
        )
    inp = run.snapshots.get("input")
    missing: list[str] = []
    dangling: list[int] = []
    for step in run.steps:
        if step.kind == "agent":
            continue
        if step.kind not in step.snapshots:
            dangling.append(step.index)
            missing.append(f"step {step.index} ({step.kind} {step.name}) has no {step.kind} snapshot")
        elif any(s.truncated or not s.intact for s in step.snapshot_list):
            missing.append(f"step {step.index} ({step.kind} {step.name}) has a truncated or damaged snapshot")
        elif isinstance(step.snapshots.get(step.kind), dict) and not _captured(step.snapshots[step.kind]):
            missing.append(f"step {step.index} ({step.kind} {step.name}) was recorded without its content")
    redacted_inputs = _has_marker({"args": (inp or {}).get("args"), "kwargs": (inp or {}).get("kwargs")})
    approvals = sorted(
        {s.name for s in run.steps if s.kind == "tool" and s.attributes.get(semconv.TOOL_RISK) in ("write", "high")}
    )
    models_without_request = [
        s.index for s in run.steps if s.kind == "model" and not (s.snapshots.get("model") or {}).get("request")
    ]
    schema_versions = {
        s.name: s.attributes.get(semconv.TOOL_SCHEMA_VERSION)
        for s in run.steps
        if s.kind == "tool" and s.attributes.get(semconv.TOOL_SCHEMA_VERSION)
    }
    mock_blockers = [] if inp else ["no input snapshot: the entrypoint cannot be called again"]
    if not run.entrypoint:
        mock_blockers.append("no entrypoint recorded: pass --app module:function")
    mock_blockers += missing
    if major != semconv.SCHEMA_MAJOR:
        mock_blockers.append("unknown convention version")
    deterministic_blockers = mock_blockers + [
        f"model step {i} was recorded without its request content" for i in models_without_request
    ]
    live_blockers = list(mock_blockers)
    live_blockers += [
        f"input {p} was redacted and must be supplied again (secrets come from the environment)"
        for p in redacted_inputs
    ]
    states = [
        {
            "seq": s.seq,
            "step_index": s.step_index,
            "transition": (s.payload or {}).get("transition"),
            "task_state": (s.payload or {}).get("task_state"),
        }
        for s in run.timeline
        if s.kind == "state" and isinstance(s.payload, dict)
    ]
    return {
        "dialect": getattr(run, "dialect", "otel_replay"),
        "integrity": {"ok": not problems, "problems": problems},
        "modes": {
            "mock": {"ready": not mock_blockers, "missing": mock_blockers},
            "deterministic": {"ready": not deterministic_blockers, "missing": deterministic_blockers},
            "live": {"ready": not live_blockers, "missing": live_blockers, "needs_approval": approvals},
        },
        "dangling_tool_calls": [i for i in dangling if run.step(i).kind == "tool"],
        "redacted_inputs": redacted_inputs,
        "tool_schema_versions": schema_versions,
        "state_walk": states,
    }


def _record_dry(session: ReplaySession, original: Run, report: dict[str, Any]) -> str:
    """A dry replay is recorded as a root span only: who looked, why, and what the check found."""
    rt = setup.runtime()
    run_id = str(uuid.uuid4())
    span = rt.tracer.start_span(
        f"{semconv.SPAN_AGENT} {original.agent}",
        context=otel_context.Context(),
        kind=SpanKind.INTERNAL,
        links=session.root_links(),
    )
    span.set_attributes(
        {
            semconv.RUN_ID: run_id,
            semconv.SCHEMA_VERSION_ATTR: semconv.SCHEMA_VERSION,
            semconv.RUN_ENTRYPOINT: original.entrypoint or "",
            semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_AGENT,
            semconv.GEN_AI_AGENT_NAME: original.agent,
            semconv.RUN_STEP_COUNT: 0,
            **{k: v for k, v in session.root_attributes().items() if v is not None},
            semconv.REPLAY_OUTCOME: "matched" if report["integrity"]["ok"] else "diverged",
            semconv.REPLAY_DIVERGED: not report["integrity"]["ok"],
        }
    )
    for problem in report["integrity"]["problems"]:
        span.add_event(
            semconv.EVENT_DIVERGENCE, {semconv.DIVERGENCE_KIND: "integrity", semconv.DIVERGENCE_REASON: problem}
        )
    session.run_started(run_id=run_id, span=span)
    span.set_status(Status(StatusCode.OK))
    span.end()
    return run_id
