"""The OpenAI Agents SDK's own tracing, bridged into the otel-replay run (part of
:mod:`otel_replay.instrumentation.openai_agents`).

Why it exists: the SDK traces its agents, handoffs, guardrails and custom spans with a tracing system of its
own (``agents.tracing``). :class:`OtelReplayTracingProcessor`, registered with the SDK's trace provider, turns
each ended span of those types into an ``otel_replay.openai_agents.span`` event of the current step (or run),
and notes the SDK's trace id on the run's root. During a replay, :func:`bridge_only_during_replays` lets only
that processor hear the SDK, so a replay never exports the SDK's traces.

What it must never do: raise into the host program (every failure is logged), send the SDK's traces anywhere
during a replay, or import the SDK at import time.

Process-wide state: the one bridge processor (:data:`BRIDGE`) registered with the SDK.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final

from .. import semconv
from ..recording import current_replay, current_run, encode_value, target_span
from ._guarded import Guards

_guards = Guards("OpenAI Agents SDK")

OTEL_REPLAY_OPENAI_AGENTS_TRACING: Final = "OTEL_REPLAY_OPENAI_AGENTS_TRACING"
"""Environment variable: what to do with the SDK's own tracing when no ``tracing=`` option is given:
``bridge`` (default: add otel-replay's processor next to the SDK's), ``replace`` (otel-replay's processor
only: nothing goes to OpenAI's trace backend) or ``off`` (leave the SDK's tracing alone)."""

TRACING_MODES: Final = ("bridge", "replace", "off")
"""The values of the ``tracing`` option."""

SPAN_EVENT: Final = semconv.EVENT_OPENAI_AGENTS_SPAN
"""Event added to the current otel-replay step or run for each bridged SDK span."""
SPAN_TYPE: Final = semconv.OPENAI_AGENTS_SPAN_TYPE
"""Attribute of :data:`SPAN_EVENT`: the SDK span's type (``agent``, ``handoff``, ``guardrail``, ``custom``…)."""
SPAN_DATA: Final = semconv.OPENAI_AGENTS_SPAN_DATA
"""Attribute of :data:`SPAN_EVENT`: the SDK span's exported data, as canonical JSON (redacted)."""
SPAN_ERROR: Final = semconv.OPENAI_AGENTS_SPAN_ERROR
"""Attribute of :data:`SPAN_EVENT`: the SDK span's error, as canonical JSON (redacted), when it has one."""
TRACE_ID_ATTR: Final = semconv.OPENAI_AGENTS_TRACE_ID
"""Attribute of the run's root span: the id of the SDK's own trace of the run (to find it in other tools)."""
_BRIDGED_TYPES: Final = frozenset({"agent", "handoff", "guardrail", "custom", "mcp_tools", "task", "turn"})
"""SDK span types bridged as events (function and model spans are steps of their own already)."""


def tracing_mode(value: Any) -> str:
    """The ``tracing`` option (None: the variable, else ``bridge``), checked; ValueError for another value."""
    mode = value if value is not None else (os.environ.get(OTEL_REPLAY_OPENAI_AGENTS_TRACING) or "bridge")
    mode = str(mode).strip().lower()
    if mode not in TRACING_MODES:
        raise ValueError(
            f"tracing must be one of {', '.join(TRACING_MODES)} (option tracing= or "
            f"{OTEL_REPLAY_OPENAI_AGENTS_TRACING}), got a value of {len(mode)} characters"
        )
    return mode


class OtelReplayTracingProcessor:
    """An ``agents.tracing`` processor that puts the SDK's own spans into the otel-replay run.

    Each ended agent, handoff, guardrail, custom, MCP, task and turn span becomes an
    ``otel_replay.openai_agents.span`` event (type, exported data and error as redacted JSON) on the current
    otel-replay step, or on the run outside steps; a started SDK trace sets
    ``otel_replay.openai_agents.trace_id`` on the run's root. Outside a run it does nothing. Never raises.
    """

    def on_trace_start(self, trace: Any) -> None:
        """Note the SDK's trace id on the current run's root span."""
        try:
            run = current_run.get()
            trace_id = getattr(trace, "trace_id", None)
            if run is not None and isinstance(trace_id, str):
                run.span.set_attribute(TRACE_ID_ATTR, trace_id)
        except Exception:  # noqa: BLE001 - never into the host program
            _guards.warn("note the SDK's trace id")

    def on_trace_end(self, trace: Any) -> None:
        """Nothing to do: the run ends with the runner's call."""

    def on_span_start(self, span: Any) -> None:
        """Nothing to do: spans are bridged when they end."""

    def on_span_end(self, span: Any) -> None:
        """Add the ended SDK span as an event of the current step or run."""
        try:
            data = getattr(span, "span_data", None)
            kind = getattr(data, "type", None)
            if kind not in _BRIDGED_TYPES:
                return
            target = target_span()
            if target is None:
                return
            run, where = target
            exported = data.export() if data is not None and hasattr(data, "export") else None
            _, text, _ = encode_value(run.rt, exported, f"openai_agents.{kind}")
            attrs = {SPAN_TYPE: str(kind), SPAN_DATA: text}
            error = getattr(span, "error", None)
            if error:
                attrs[SPAN_ERROR] = encode_value(run.rt, error, f"openai_agents.{kind}.error")[1]
            where.add_event(SPAN_EVENT, attrs)
        except Exception:  # noqa: BLE001 - never into the host program
            _guards.warn("bridge an SDK span")

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self) -> None:
        """Nothing is buffered."""


BRIDGE: Final = OtelReplayTracingProcessor()
"""The one processor registered with the SDK. It has the methods of ``agents.tracing.TracingProcessor`` without
subclassing it (the SDK is an optional extra, and this module is imported without it), which is all the SDK
calls; its annotations ask for the subclass, hence the two targeted ``type: ignore`` where it is registered."""


def bridge_only_during_replays(method: str) -> Callable[..., Any]:
    """Wrapper of ``SynchronousMultiTracingProcessor.<method>``: during a replay only the bridge is told, so a
    replay never exports the SDK's traces (to OpenAI's backend, or wherever the application sends them)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if current_replay.get() is None:
            return wrapped(*args, **kwargs)
        try:
            bridges = [p for p in getattr(instance, "_processors", ()) if isinstance(p, OtelReplayTracingProcessor)]
        except Exception:  # noqa: BLE001
            bridges = []
        for processor in bridges:
            getattr(processor, method)(*args, **kwargs)
        return None

    return wrapper
