"""A dry replay: :func:`readiness` (a recorded run's integrity and what each other mode still needs) and
the root span that records who looked, why and what the check found.

It must never run recorded code, call a model or tool, or read or write a store. The one thing of the current
code it looks at is the source of the functions recorded as write/high tools (read and parsed, never imported,
see :func:`otel_replay.replay.safety.riskytools.declared_now`), to say which ones lost their ``@otel_replay.tool``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import semconv
from ..exporting import setup
from ..markers import marker_paths
from ..runs import Run
from .answers import captured
from .matching.toolcalls import code_tools
from .safety.riskytools import current_declarations, recorded_risky
from .session import ReplaySession


def has_marker(tree: Any) -> list[str]:
    """Paths of redaction markers in a recorded payload: marker objects and inline ``[REDACTED:…]`` tokens."""

    return marker_paths(tree)


def readiness(run: Run, *, entrypoint: str | None = None) -> dict[str, Any]:
    """Integrity and replay-readiness of a recorded run (what a dry replay reports). ``entrypoint``: the one the
    person replaying gave (``--app``), which stands in for a run that recorded none; it is not imported here."""
    problems = list(run.problems)
    major = semconv.schema_major(run.schema_version or "")
    if major not in semconv.READABLE_MAJORS:
        problems.append(
            f"recorded with convention {run.schema_version!r}; this otel-replay reads {semconv.READABLE_TEXT}"
        )
    inp = run.snapshots.get("input")
    missing: list[str] = []
    dangling: list[int] = []
    for step in run.steps:
        if step.kind == "agent":
            continue
        snapshot = semconv.STEP_SNAPSHOT.get(step.kind, step.kind)
        if snapshot not in step.snapshots:
            dangling.append(step.index)
            missing.append(f"step {step.index} ({step.kind} {step.name}) has no {snapshot} snapshot")
        elif any(s.truncated or not s.intact for s in step.snapshot_list):
            missing.append(f"step {step.index} ({step.kind} {step.name}) has a truncated or damaged snapshot")
        elif isinstance(step.snapshots.get(snapshot), dict) and not captured(step.snapshots[snapshot]):
            missing.append(f"step {step.index} ({step.kind} {step.name}) was recorded without its content")
    redacted_inputs = has_marker({"args": (inp or {}).get("args"), "kwargs": (inp or {}).get("kwargs")})
    # every write/high tool of the recording (a missing risk counts as high), declared now or not
    approvals = sorted(recorded_risky(run))
    models_without_request = [
        s.index for s in run.steps if s.kind == "model" and not (s.snapshots.get("model") or {}).get("request")
    ]
    schema_versions = {
        s.name: s.attributes.get(semconv.TOOL_SCHEMA_VERSION)
        for s in run.steps
        if s.kind in semconv.TOOL_CALL_KINDS and s.attributes.get(semconv.TOOL_SCHEMA_VERSION)
    }
    mock_blockers = [] if inp else ["no input snapshot: the entrypoint cannot be called again"]
    if not (entrypoint or run.entrypoint):
        mock_blockers.append("no entrypoint recorded: pass --app module:function")
    mock_blockers += missing
    if major not in semconv.READABLE_MAJORS:
        mock_blockers.append("unknown convention version")
    deterministic_blockers = mock_blockers + [
        f"model step {i} was recorded without its request content" for i in models_without_request
    ]
    declared = current_declarations(run)
    risky_tools = {
        tool.name: {"risk": tool.risk, "step_index": tool.step_index, "declared_now": declared.get(tool.name)}
        for tool in recorded_risky(run).values()
    }
    live_blockers = list(mock_blockers)
    live_blockers += [
        f"input {p} was redacted and must be supplied again (secrets come from the environment)"
        for p in redacted_inputs
    ]
    live_blockers += [
        f"tool {name} has risk {tool['risk']} in the recording (step {tool['step_index']}) and its function no "
        "longer carries @otel_replay.tool: a live replay is refused when it runs undeclared"
        for name, tool in risky_tools.items()
        if tool["declared_now"] is False
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
        "dangling_tool_calls": [i for i in dangling if run.step(i).kind in semconv.TOOL_CALL_KINDS],
        "redacted_inputs": redacted_inputs,
        "tool_schema_versions": schema_versions,
        "state_walk": states,
        "risky_tools": risky_tools,
        # the agent runs code its model wrote (a smolagents CodeAgent): see the not_firewalled tools
        "executes_code": code_tools(run) is not None,
        "servers": servers(run),
    }


def servers(run: Run) -> list[dict[str, Any]]:
    """The MCP servers the run's calls went to (``otel_replay.mcp.server`` of its steps), in order of first use,
    each with its steps: processes and connections a live replay starts again, and that a mock or deterministic
    replay does not start (their calls are answered from the recording)."""
    found: dict[str, list[int]] = {}
    for step in run.steps:
        server = step.attributes.get(semconv.MCP_SERVER)
        if isinstance(server, str) and server:
            found.setdefault(server, []).append(step.index)
    return [
        {"server": server, "steps": steps, "offline": "answered from the recording, not started", "live": "started"}
        for server, steps in found.items()
    ]


def record_dry(session: ReplaySession, original: Run, report: dict[str, Any]) -> str:
    """A dry replay is recorded as a root span only: who looked, why, and what the check found."""
    ok = report["integrity"]["ok"]
    events = [("integrity", problem, None) for problem in report["integrity"]["problems"]]
    return record_root(session, original, outcome="matched" if ok else "diverged", events=events)


def record_root(
    session: ReplaySession,
    original: Run,
    *,
    outcome: str,
    events: Sequence[tuple[str, str, int | None]],
    attributes: dict[str, Any] | None = None,
    refused_tools: Sequence[tuple[str, str]] = (),
) -> str:
    """A replay that runs no code (dry, or a live replay refused before it starts) recorded as its root span:
    who replayed, why, the outcome and one divergence event per ``(kind, reason, step)``; with
    ``refused_tools`` (``(name, risk)``), one refused tool step each, as a replay stopped at a refused call
    records it (``otel_replay.replay.served = refused``, status error, nothing executed)."""
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
            semconv.RUN_STEP_COUNT: len(refused_tools),
            **{k: v for k, v in session.root_attributes().items() if v is not None},
            semconv.REPLAY_OUTCOME: outcome,
            semconv.REPLAY_DIVERGED: outcome == "diverged",
            **(attributes or {}),
        }
    )
    for kind, reason, step_index in events:
        attrs: dict[str, str | int] = {semconv.DIVERGENCE_KIND: kind, semconv.DIVERGENCE_REASON: reason}
        if step_index is not None:
            attrs[semconv.DIVERGENCE_STEP] = step_index
        span.add_event(semconv.EVENT_DIVERGENCE, attrs)
    session.run_started(run_id=run_id, span=span)
    for index, (name, risk) in enumerate(refused_tools):
        step = rt.tracer.start_span(
            f"{semconv.SPAN_TOOL} {name}",
            context=trace.set_span_in_context(span),
            kind=SpanKind.INTERNAL,
            attributes={
                semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_TOOL,
                semconv.GEN_AI_TOOL_NAME: name,
                semconv.GEN_AI_TOOL_TYPE: "function",
                semconv.TOOL_RISK: risk,
                semconv.STEP_INDEX: index,
                semconv.STEP_KIND: "tool",
                semconv.STEP_NAME: name,
                semconv.STEP_ATTEMPT: 1,
                semconv.REPLAY_SERVED: "refused",
            },
        )
        step.set_status(Status(StatusCode.ERROR, session.refusal))
        step.end()
    # a refused replay's root is an error, as that of a replay stopped at a refused call
    span.set_status(Status(StatusCode.ERROR, session.refusal) if outcome == "refused" else Status(StatusCode.OK))
    span.end()
    return run_id
