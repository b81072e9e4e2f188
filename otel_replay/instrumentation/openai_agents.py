"""OpenAI Agents SDK instrumentation: agent runs, ``@function_tool`` calls and handoffs as otel-replay steps.

Why it exists: an agent built on the OpenAI Agents SDK (``pip install openai-agents``, module ``agents``)
should be recorded step by step and replayed in every mode without touching its code, its function tools
going through the same firewall as ``@otel_replay.tool`` functions. This module wraps the SDK where a whole
call is visible as the SDK's own objects, and answers each call from the recording at that same boundary:

* runs: ``AgentRunner.run`` / ``run_sync`` / ``run_streamed`` (what ``Runner.run``, ``Runner.run_sync`` and
  ``Runner.run_streamed`` call) begin an implicit run when none is current: one run per agent invocation, its
  input the ``input`` given, its output the run's ``final_output``;
* function tools: the SDK's tool-invocation boundary (``_invoke_function_tool_with_metadata``, reached by every
  ``FunctionTool`` call of a run with the model's arguments as JSON text) records a tool step with those
  arguments, the tool's risk, the function's ``module:qualname`` and the output (the text the SDK's failure
  handling makes of an exception included); during a replay the recorded output comes back and the tool does
  not run;
* handoffs: ``Handoff.on_invoke_handoff`` of every ``Handoff`` built after :meth:`instrument` (those the SDK
  builds for ``Agent(handoffs=[...])`` at run time included) is a tool step named after the handoff's tool
  (``transfer_to_…``), risk ``read`` unless declared; a replay hands back the target agent the handoff holds,
  without calling its ``on_handoff`` callback;
* model calls go through the ``openai`` client and are recorded and answered by the OpenAI instrumentor
  (:mod:`otel_replay.instrumentation.openai`); streamed Responses calls are made through the client's plain
  ``responses.create(stream=True)`` (the SDK's own fallback) instead of ``with_streaming_response``, so that
  instrumentor sees them;
* the SDK's own tracing (``agents.tracing``) is bridged (:class:`OtelReplayTracingProcessor`): its agent,
  handoff, guardrail and custom spans become events of the otel-replay run; ``tracing="replace"`` (or
  ``OTEL_REPLAY_OPENAI_AGENTS_TRACING=replace``) also removes the SDK's default exporter to OpenAI's backend.
  During a replay the SDK's other trace processors receive nothing, so a replay never exports to OpenAI.

Risk of a function tool: ``tool_risks={name: risk}`` given to :meth:`OpenAIAgentsInstrumentor.instrument`,
else an ``otel_replay_risk`` attribute on the ``FunctionTool`` (:func:`declare_risk`), else the recorder's name
heuristic (``send_…``, ``delete_…`` are ``high``). A function tool whose function is an ``@otel_replay.tool``
is recorded by that decorator instead (never twice).

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions, run a tool or handoff the replay answered, send
the SDK's traces anywhere during a replay, or import the SDK before :meth:`OpenAIAgentsInstrumentor.instrument`
is called. :class:`~otel_replay.recording.ReplayInterrupt` (a ``BaseException``) always propagates.

This module is the instrumentor (options, risks, patching and unpatching); the wrappers it installs live in
:mod:`otel_replay.instrumentation._agents_steps` (runs, tools, handoffs, the model client) and the tracing
bridge in :mod:`otel_replay.instrumentation._agents_tracing`. Every public name stays importable from here.

Process-wide state: the SDK classes and module functions it wraps, the one bridge processor it registers with
the SDK's trace provider (and the processors ``tracing="replace"`` set aside, given back by ``uninstrument``),
and the ``tracer_provider=`` binding it gives the wrappers' guards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ._agents_steps import (
    HANDOFF_TO_ATTR,
    function_tool_of,
    get_client_wrapper,
    guards,
    handoff_init_wrapper,
    invoke_function_tool,
    run_wrappers,
    tool_wrapper,
    wrapped_callable,
)
from ._agents_tracing import (
    BRIDGE,
    OTEL_REPLAY_OPENAI_AGENTS_TRACING,
    SPAN_DATA,
    SPAN_ERROR,
    SPAN_EVENT,
    SPAN_TYPE,
    TRACE_ID_ATTR,
    TRACING_MODES,
    OtelReplayTracingProcessor,
    bridge_only_during_replays,
    tracing_mode,
)
from ._guarded import RISKS as _RISKS
from ._guarded import check_risks as _check_risks
from ._guarded import patch, unpatch

__all__ = [
    "HANDOFF_TO_ATTR",
    "OTEL_REPLAY_OPENAI_AGENTS_TRACING",
    "RISK_ATTRIBUTE",
    "SPAN_DATA",
    "SPAN_ERROR",
    "SPAN_EVENT",
    "SPAN_TYPE",
    "TRACE_ID_ATTR",
    "TRACING_MODES",
    "OpenAIAgentsInstrumentor",
    "OtelReplayTracingProcessor",
    "declare_risk",
    "function_tool_of",
    "invoke_function_tool",
]

_log = logging.getLogger("otel_replay")
langchain_warn, _safely = guards.warn, guards.safely

_instruments: Final = ("openai-agents >= 0.2",)
"""The SDK versions this instrumentor supports (``opentelemetry-instrument`` checks them)."""

RISK_ATTRIBUTE: Final = "otel_replay_risk"
"""Attribute of a ``FunctionTool`` (or ``Handoff``) that declares its risk (see :func:`declare_risk`)."""

_RUNNER: Final = "agents.run"
_TOOL: Final = "agents.tool"
_TOOL_EXECUTION: Final = "agents.run_internal.tool_execution"
_HANDOFFS: Final = "agents.handoffs"
_RESPONSES_MODEL: Final = "agents.models.openai_responses"
_PROVIDER: Final = "agents.tracing.provider"
_INVOKE: Final = "_invoke_function_tool_with_metadata"


def declare_risk(tool: Any, risk: str) -> Any:
    """Declare the risk (``read``, ``write`` or ``high``) of an Agents SDK ``FunctionTool`` or ``Handoff``;
    returns it. ``tool_risks`` given to the instrumentor wins over it. ValueError for another risk."""
    if risk not in _RISKS:
        raise ValueError(f"risk must be one of {sorted(_RISKS)}, got {risk!r}")
    object.__setattr__(tool, RISK_ATTRIBUTE, risk)  # Handoff is a frozen dataclass
    return tool


# -------------------------------------------------------------------------------------- instrumentor


class OpenAIAgentsInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records OpenAI Agents SDK runs, function tools and handoffs as otel-replay runs and steps, answers them
    from the recording during a replay, and bridges the SDK's own tracing into the run.

    Options (constructor or :meth:`instrument`): ``tool_risks`` maps tool (or handoff tool) names to
    ``read`` / ``write`` / ``high``; a tool not in the map takes the risk declared on it (:func:`declare_risk`),
    else the recorder's name heuristic; a handoff not in the map is ``read``. ``tracing`` is ``bridge``
    (default), ``replace`` or ``off`` (see :data:`OTEL_REPLAY_OPENAI_AGENTS_TRACING`). :meth:`instrument` also
    takes ``tracer_provider``: the runs, tool and handoff steps it records go to that provider instead of the
    current runtime's (and so do the OpenAI instrumentor's model steps inside those runs, unless it was given a
    provider of its own; see ``docs/instrumentation.md``).
    Bad values raise ValueError.

    Like every ``BaseInstrumentor`` it is a singleton: constructing it again keeps the current options unless
    new ones are given.
    """

    def __init__(self, *, tool_risks: Mapping[str, str] | None = None, tracing: str | None = None) -> None:
        if tool_risks is not None or not hasattr(self, "_tool_risks"):
            self._tool_risks: dict[str, str] = _check_risks(tool_risks)
        if tracing is not None or not hasattr(self, "_tracing"):
            self._tracing: str | None = tracing_mode(tracing) if tracing is not None else None

    def instrumentation_dependencies(self) -> Collection[str]:
        """The SDK requirement checked by ``instrument()`` and ``opentelemetry-instrument``."""
        return _instruments

    def risk_of(self, tool: Any, default: str | None = None) -> str | None:
        """The declared risk of a function tool or handoff: from ``tool_risks`` by its name, else its
        ``otel_replay_risk`` attribute, else ``default`` (None: the recorder's name heuristic). Never raises."""
        try:
            name = str(getattr(tool, "name", None) or getattr(tool, "tool_name", None) or "")
            if name in self._tool_risks:
                return self._tool_risks[name]
            marked = getattr(tool, RISK_ATTRIBUTE, None)
            if marked is None:
                func = wrapped_callable(tool)
                marker = getattr(func, "__otel_replay__", None) if func is not None else None
                marked = marker.get("risk") if isinstance(marker, dict) and marker.get("kind") == "tool" else None
            if marked is None:
                return default
            if marked not in _RISKS:
                _log.warning("otel-replay: tool %r is marked with unknown risk %r; treated as undeclared", name, marked)
                return default
            return str(marked)
        except Exception:  # noqa: BLE001
            langchain_warn("read the tool's risk")
            return default

    def _targets(self) -> list[tuple[str, str, Callable[..., Any]]]:
        """(module, ``Class.method`` or function name, wrapper) of every patch."""
        run, run_sync, run_streamed = run_wrappers()
        tool = tool_wrapper(self)
        return [
            (_RUNNER, "AgentRunner.run", run),
            (_RUNNER, "AgentRunner.run_sync", run_sync),
            (_RUNNER, "AgentRunner.run_streamed", run_streamed),
            (_TOOL, _INVOKE, tool),
            (_TOOL_EXECUTION, _INVOKE, tool),
            (_HANDOFFS, "Handoff.__init__", handoff_init_wrapper(self)),
            (_RESPONSES_MODEL, "OpenAIResponsesModel._get_client", get_client_wrapper),
            *[
                (_PROVIDER, f"SynchronousMultiTracingProcessor.{m}", bridge_only_during_replays(m))
                for m in ("on_trace_start", "on_trace_end", "on_span_start", "on_span_end")
            ],
        ]

    def check_options(self, **options: Any) -> None:
        """Raise ValueError for options :meth:`instrument` would refuse (``tool_risks``, ``tracing``), without
        instrumenting: ``orp.instrument()`` checks them before it arms the instrumentor for an SDK not imported
        yet."""
        if "tool_risks" in options:
            _check_risks(options["tool_risks"])
        if "tracing" in options:
            tracing_mode(options["tracing"])

    def _instrument(self, **kwargs: Any) -> None:
        if "tool_risks" in kwargs:
            self._tool_risks = _check_risks(kwargs["tool_risks"])
        mode = tracing_mode(kwargs.get("tracing", self._tracing))
        guards.bind(kwargs.get("tracer_provider"))
        self._patched: list[tuple[str, str]] = []
        for module, target, wrapper in self._targets():
            patch("the OpenAI Agents SDK", module, target, wrapper, self._patched)
        self._set_aside: list[Any] | None = None
        self._bridged = False
        if mode != "off":
            _safely("bridge the SDK's tracing", self._bridge, mode)
        _safely("register the SDK's tool output models", _register_models)

    def _bridge(self, mode: str) -> None:
        from agents.tracing import get_trace_provider

        provider = get_trace_provider()
        multi = getattr(provider, "_multi_processor", None)
        current = list(getattr(multi, "_processors", ()) or ())
        if mode == "replace":
            self._set_aside = [p for p in current if p is not BRIDGE]
            provider.set_processors([BRIDGE])  # type: ignore[list-item]  # duck-typed: see BRIDGE
        elif BRIDGE not in current:
            provider.register_processor(BRIDGE)  # type: ignore[arg-type]  # duck-typed: see BRIDGE
        self._bridged = True

    def _unbridge(self) -> None:
        from agents.tracing import get_trace_provider

        provider = get_trace_provider()
        multi = getattr(provider, "_multi_processor", None)
        current = [p for p in (getattr(multi, "_processors", ()) or ()) if p is not BRIDGE]
        provider.set_processors(current + list(self._set_aside or []))
        self._set_aside = None
        self._bridged = False

    def _uninstrument(self, **kwargs: Any) -> None:
        unpatch(getattr(self, "_patched", []))
        self._patched = []
        guards.bind(None)
        if getattr(self, "_bridged", False):
            _safely("remove the tracing bridge", self._unbridge)


def _register_models() -> None:
    """Register the SDK's structured tool outputs, so a recorded one is rebuilt in a replay."""
    from agents.tool import ToolOutputFileContent, ToolOutputImage, ToolOutputText

    from ..revival import register_types

    register_types((ToolOutputText, ToolOutputImage, ToolOutputFileContent))
