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

Process-wide state: the SDK classes and module functions it wraps, the one bridge processor it registers with
the SDK's trace provider (and the processors ``tracing="replace"`` set aside, given back by ``uninstrument``).
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap

from .. import semconv
from ..recording import DivergenceStop, ReplayInterrupt, begin_tool_call, end_call, end_run, in_run
from ..snapshots import qualname_of
from ._guarded import RISKS as _RISKS
from ._guarded import Guards
from ._guarded import check_risks as _check_risks
from ._guarded import enabled as _enabled
from ._sdk import _ObjectProxy

_log = logging.getLogger("otel_replay")
_guards = Guards("OpenAI Agents SDK")
_warn, _safely, _begin = _guards.warn, _guards.safely, _guards.begin

_instruments: Final = ("openai-agents >= 0.2",)
"""The SDK versions this instrumentor supports (``opentelemetry-instrument`` checks them)."""

RISK_ATTRIBUTE: Final = "otel_replay_risk"
"""Attribute of a ``FunctionTool`` (or ``Handoff``) that declares its risk (see :func:`declare_risk`)."""

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
HANDOFF_TO_ATTR: Final = semconv.OPENAI_AGENTS_HANDOFF_TO
"""Attribute of a handoff step: the name of the agent the handoff hands over to."""

_NAME: Final = "openai_agents"  # otel_replay.step.instrumentation of the steps recorded here
_BRIDGED_TYPES: Final = frozenset({"agent", "handoff", "guardrail", "custom", "mcp_tools", "task", "turn"})
"""SDK span types bridged as events (function and model spans are steps of their own already)."""

_RUNNER: Final = "agents.run"
_TOOL: Final = "agents.tool"
_TOOL_EXECUTION: Final = "agents.run_internal.tool_execution"
_HANDOFFS: Final = "agents.handoffs"
_RESPONSES_MODEL: Final = "agents.models.openai_responses"
_PROVIDER: Final = "agents.tracing.provider"
_INVOKE: Final = "_invoke_function_tool_with_metadata"


# -------------------------------------------------------------------------------------------- helpers


def _stop(reason: str) -> ReplayInterrupt:

    return DivergenceStop(f"replay stopped: {reason}")


def declare_risk(tool: Any, risk: str) -> Any:
    """Declare the risk (``read``, ``write`` or ``high``) of an Agents SDK ``FunctionTool`` or ``Handoff``;
    returns it. ``tool_risks`` given to the instrumentor wins over it. ValueError for another risk."""
    if risk not in _RISKS:
        raise ValueError(f"risk must be one of {sorted(_RISKS)}, got {risk!r}")
    object.__setattr__(tool, RISK_ATTRIBUTE, risk)  # Handoff is a frozen dataclass
    return tool


def _tracing_mode(value: Any) -> str:
    mode = value if value is not None else (os.environ.get(OTEL_REPLAY_OPENAI_AGENTS_TRACING) or "bridge")
    mode = str(mode).strip().lower()
    if mode not in TRACING_MODES:
        raise ValueError(
            f"tracing must be one of {', '.join(TRACING_MODES)} (option tracing= or "
            f"{OTEL_REPLAY_OPENAI_AGENTS_TRACING}), got a value of {len(mode)} characters"
        )
    return mode


# ---------------------------------------------------------------------------------------------- runs


def _run_arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``run(starting_agent, input, **options)`` → the run's recorded input: the ``input`` given."""
    value = args[1] if len(args) > 1 else kwargs.get("input")
    return {"input": value}


def _run_name_and_config(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    agent = args[0] if args else kwargs.get("starting_agent")
    name = getattr(agent, "name", None)
    name = name if isinstance(name, str) and name else "openai_agents.run"
    config: dict[str, Any] = {"agent": name}
    model = getattr(agent, "model", None)
    if isinstance(model, str):
        config["model"] = model
    max_turns = kwargs.get("max_turns")
    if isinstance(max_turns, int):
        config["max_turns"] = max_turns
    return name, config


def _begin_implicit_run(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    parts = _safely("read the run's input", lambda: (_run_name_and_config(args, kwargs), _run_arguments(args, kwargs)))
    if parts is None:
        return None
    (name, config), arguments = parts
    return _guards.begin_run(name, arguments=arguments, config=config, script=_main_script())


def _main_script() -> str | None:
    """The file of the ``__main__`` module (a tool defined in it is recorded as ``__main__:name``)."""
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    return os.path.abspath(file) if isinstance(file, str) and file.endswith(".py") else None


def _final_output(result: Any) -> Any:
    """What a run's output snapshot holds: the ``final_output`` of the SDK's ``RunResult``."""
    return getattr(result, "final_output", result)


def _run_wrappers() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """Wrappers of ``AgentRunner.run`` (async), ``run_sync`` and ``run_streamed``: implicit runs only."""

    async def run_async(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        handle = _begin_implicit_run(args, kwargs)
        if handle is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            end_run(handle, exc=exc)
            raise
        end_run(handle, result=_safely("read the final output", _final_output, result))
        return result

    def run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        return run_async(wrapped, args, kwargs)

    def run_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        handle = _begin_implicit_run(args, kwargs)
        if handle is None:
            return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            end_run(handle, exc=exc)
            raise
        end_run(handle, result=_safely("read the final output", _final_output, result))
        return result

    def run_streamed(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # The run goes on in a task after this returns: it lives in a context of its own, which the SDK's
        # task copies, and ends when the task does (the caller's context is left as it was).
        if in_run() or not _enabled():
            return wrapped(*args, **kwargs)
        ctx = contextvars.copy_context()
        handle = ctx.run(_begin_implicit_run, args, kwargs)
        if handle is None:
            return wrapped(*args, **kwargs)
        try:
            streamed = ctx.run(wrapped, *args, **kwargs)
        except BaseException as exc:
            ctx.run(end_run, handle, exc=exc)
            raise
        task = getattr(streamed, "run_loop_task", None)
        if task is None or not _safely(
            "follow the streamed run", _end_with_task, ctx, handle, streamed, task, default=False
        ):
            ctx.run(end_run, handle, result=None)
        return streamed

    return run, run_sync, run_streamed


def _end_with_task(ctx: contextvars.Context, handle: Any, streamed: Any, task: Any) -> bool:
    """End the streamed run (in its own context) when the SDK's run task is done."""

    def done(finished: Any) -> None:
        exc: BaseException | None = None
        if finished.cancelled():
            import asyncio

            exc = asyncio.CancelledError()
        else:
            exc = finished.exception() or getattr(streamed, "_stored_exception", None)
        if exc is not None:
            ctx.run(end_run, handle, exc=exc)
        else:
            ctx.run(end_run, handle, result=_safely("read the final output", _final_output, streamed))

    task.add_done_callback(done)
    return True


# --------------------------------------------------------------------------------------------- tools


def _parsed_arguments(raw: Any) -> dict[str, Any]:
    """The model's arguments (a JSON string) as named arguments; anything else under ``input``."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"input": raw}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return raw if isinstance(raw, dict) else {"input": raw}


def _wrapped_callable(tool: Any) -> Any:
    """The Python function behind a ``@function_tool``, or None (a hand-made ``FunctionTool``)."""
    try:
        return tool.__wrapped__
    except Exception:  # noqa: BLE001 - AttributeError for hand-made tools, anything for odd subclasses
        return None


def _tool_function(tool: Any, func: Any) -> str | None:
    """``module:qualname`` of the function behind ``tool`` when that name leads (in its module) to the tool
    itself or to the function, so ``otel-replay replay-tool`` can find it again; None otherwise."""
    if func is None:
        return None
    module = sys.modules.get(getattr(func, "__module__", "") or "")
    qualname = getattr(func, "__qualname__", "") or ""
    if module is None or not qualname or "<locals>" in qualname:
        return None
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    if obj is func or (obj is not None and _wrapped_callable(obj) is func):
        return qualname_of(func)
    return None


class _ToolParts:
    __slots__ = ("arguments", "decorated", "function", "name", "risk")

    def __init__(self, instrumentor: OpenAIAgentsInstrumentor, tool: Any, raw_arguments: Any) -> None:
        self.name = str(getattr(tool, "name", None) or type(tool).__name__)
        self.arguments = _parsed_arguments(raw_arguments)
        func = _wrapped_callable(tool)
        marker = getattr(func, "__otel_replay__", None)
        self.decorated = isinstance(marker, dict) and marker.get("kind") == "tool"
        self.risk = instrumentor.risk_of(tool)
        self.function = _tool_function(tool, func)


def _recordable_output(tool: Any, output: Any) -> Any:
    """A tool's output as the recording keeps it, so a replay hands the SDK a value it turns into the same text
    for the model: plain JSON, or a type a replay can rebuild, as it is; a tool with an output schema's value as
    the JSON the SDK dumps; any other object as the text the SDK sends the model for it (``str(output)``)."""
    adapter = getattr(tool, "_output_type_adapter", None)
    if adapter is not None and not isinstance(output, str):
        return adapter.dump_python(output, mode="json", by_alias=True)
    if getattr(tool, "output_json_schema", None) is not None and not isinstance(output, str):
        from pydantic import TypeAdapter

        return TypeAdapter(Any).dump_python(output, mode="json")
    return output if _revivable(output) else str(output)


def _revivable(value: Any, depth: int = 0) -> bool:
    """True when a replay gets ``value`` back equal from the recording (plain JSON, registered types)."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if depth > 32:
        return False
    if type(value) is list:
        return all(_revivable(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _revivable(v, depth + 1) for k, v in value.items())
    from ..revival import registered

    return registered(qualname_of(type(value))) is not None


def _invocation_result(value: Any, *, sdk_error: bool) -> Any:
    from agents.tool import _FunctionToolInvocationResult

    return _FunctionToolInvocationResult(value, is_sdk_generated_error=sdk_error)


def _served_sdk_error(tool: Any, value: Any) -> bool:
    """Whether a recorded output was the SDK's own error text: for a tool with an output schema, whose outputs
    are recorded as JSON objects, a text can only be that."""
    schema = getattr(tool, "_output_type_adapter", None) is not None or getattr(tool, "output_json_schema", None)
    return bool(schema) and isinstance(value, str)


def _tool_wrapper(instrumentor: OpenAIAgentsInstrumentor) -> Callable[..., Any]:
    """Wrapper of ``_invoke_function_tool_with_metadata(*, function_tool, context, arguments)``."""

    async def body(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], parts: _ToolParts | None) -> Any:
        tool = kwargs.get("function_tool")
        call = (
            _begin(
                "tool",
                begin_tool_call,
                parts.name,
                parts.arguments,
                risk=parts.risk,
                function=parts.function,
                instrumentation=_NAME,
            )
            if parts is not None
            else None
        )
        served = call.served if call is not None else None
        if served is None:
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            if call is not None:
                output = getattr(result, "output", result)
                end_call(
                    call, result=_safely("encode the tool output", _recordable_output, tool, output, default=output)
                )
            return result
        if served.error is not None:
            end_call(call, exc=served.error)
            raise served.error
        end_call(call, result=served.value)
        return _invocation_result(served.value, sdk_error=_served_sdk_error(tool, served.value))

    async def in_run_body(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], parts: _ToolParts | None) -> Any:
        if in_run() or parts is None:
            return await body(wrapped, args, kwargs, parts)
        handle = _guards.begin_run(parts.name, arguments=parts.arguments, script=_main_script())
        try:
            result = await body(wrapped, args, kwargs, parts)
        except BaseException as exc:
            end_run(handle, exc=exc)
            raise
        end_run(handle, result=getattr(result, "output", result))
        return result

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)
        parts = _safely(
            "read the tool call", _ToolParts, instrumentor, kwargs.get("function_tool"), kwargs.get("arguments")
        )
        if parts is not None and parts.decorated:  # an @otel_replay.tool function records itself
            return wrapped(*args, **kwargs)
        return in_run_body(wrapped, args, kwargs, parts)

    return wrapper


# ------------------------------------------------------------------------------------------ handoffs


def _handoff_invoker(
    instrumentor: OpenAIAgentsInstrumentor, handoff: Any, original: Callable[..., Any]
) -> Callable[..., Any]:
    """``on_invoke_handoff`` of ``handoff``, recorded as a tool step and answered in a replay."""

    async def invoke(ctx: Any, input_json: Any = None, *rest: Any, **options: Any) -> Any:
        if not _enabled() or not instrumentor.is_instrumented_by_opentelemetry or not in_run():
            return await original(ctx, input_json, *rest, **options)
        name = str(getattr(handoff, "tool_name", None) or "handoff")
        arguments = _safely("read the handoff", _parsed_arguments, input_json or "", default={})
        risk = instrumentor.risk_of(handoff, default="read")
        call = _begin("handoff", begin_tool_call, name, arguments, risk=risk, instrumentation=_NAME)
        served = call.served if call is not None else None
        if served is None:
            try:
                agent = await original(ctx, input_json, *rest, **options)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            to = getattr(agent, "name", None)
            if call is not None:
                _safely("note the handoff target", call.step.span.set_attribute, HANDOFF_TO_ATTR, str(to))
            end_call(call, result={"agent": to})
            return agent
        if served.error is not None:
            end_call(call, exc=served.error)
            raise served.error
        recorded = served.value.get("agent") if isinstance(served.value, dict) else None
        ref = getattr(handoff, "_agent_ref", None)
        target = _safely("find the handoff target", ref) if callable(ref) else None
        if target is None or getattr(target, "name", None) != recorded:
            stop = _stop(
                f"the recorded handoff {name!r} went to agent {recorded!r}, which this handoff does not "
                "hold (build it with agents.handoff(agent), or replay live)"
            )
            end_call(call, exc=stop)
            raise stop
        end_call(call, result=served.value)
        return target

    invoke.__otel_replay_handoff__ = True  # type: ignore[attr-defined]
    return invoke


def _handoff_init_wrapper(instrumentor: OpenAIAgentsInstrumentor) -> Callable[..., Any]:
    """Wrapper of ``Handoff.__init__``: the new handoff's ``on_invoke_handoff`` is recorded."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = wrapped(*args, **kwargs)
        original = getattr(instance, "on_invoke_handoff", None)
        if callable(original) and not getattr(original, "__otel_replay_handoff__", False):
            _safely(
                "wrap the handoff",
                object.__setattr__,
                instance,
                "on_invoke_handoff",
                _handoff_invoker(instrumentor, instance, original),
            )
        return out

    return wrapper


# ------------------------------------------------------------------------------------- model client


class _ResponsesWithoutRawStreaming(_ObjectProxy):
    """A client's ``responses`` resource without ``with_streaming_response``: the SDK then streams through
    ``responses.create(stream=True)``, which the OpenAI instrumentor records and answers."""

    def __getattr__(self, name: str) -> Any:
        if name == "with_streaming_response":  # hidden: the SDK falls back to create(stream=True)
            raise AttributeError(name)
        return getattr(self.__wrapped__, name)


class _ClientWithoutRawStreaming(_ObjectProxy):
    """An ``AsyncOpenAI`` client whose ``responses`` hides ``with_streaming_response``."""

    @property
    def responses(self) -> Any:
        """The client's responses resource, without ``with_streaming_response``."""
        return _ResponsesWithoutRawStreaming(self.__wrapped__.responses)


def _get_client_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    client = wrapped(*args, **kwargs)
    if not _enabled() or isinstance(client, _ClientWithoutRawStreaming):
        return client
    return _safely("wrap the model client", _ClientWithoutRawStreaming, client, default=client)


# ------------------------------------------------------------------------------------------- tracing


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
            from ..recording import _current_run

            run = _current_run.get()
            trace_id = getattr(trace, "trace_id", None)
            if run is not None and isinstance(trace_id, str):
                run.span.set_attribute(TRACE_ID_ATTR, trace_id)
        except Exception:  # noqa: BLE001 - never into the host program
            _warn("note the SDK's trace id")

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
            from ..recording import _encode, _target_span

            target = _target_span()
            if target is None:
                return
            run, where = target
            exported = data.export() if data is not None and hasattr(data, "export") else None
            _, text, _ = _encode(run.rt, exported, f"openai_agents.{kind}")
            attrs = {SPAN_TYPE: str(kind), SPAN_DATA: text}
            error = getattr(span, "error", None)
            if error:
                attrs[SPAN_ERROR] = _encode(run.rt, error, f"openai_agents.{kind}.error")[1]
            where.add_event(SPAN_EVENT, attrs)
        except Exception:  # noqa: BLE001 - never into the host program
            _warn("bridge an SDK span")

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self) -> None:
        """Nothing is buffered."""


_BRIDGE: Final = OtelReplayTracingProcessor()
"""The one processor registered with the SDK. It has the methods of ``agents.tracing.TracingProcessor`` without
subclassing it (the SDK is an optional extra, and this module is imported without it), which is all the SDK
calls; its annotations ask for the subclass, hence the two targeted ``type: ignore`` where it is registered."""
"""The one bridge processor registered with the SDK's trace provider."""


def _bridge_only_during_replays(method: str) -> Callable[..., Any]:
    """Wrapper of ``SynchronousMultiTracingProcessor.<method>``: during a replay only the bridge is told, so a
    replay never exports the SDK's traces (to OpenAI's backend, or wherever the application sends them)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from ..recording import _replay_session

        if _replay_session.get() is None:
            return wrapped(*args, **kwargs)
        try:
            bridges = [p for p in getattr(instance, "_processors", ()) if isinstance(p, OtelReplayTracingProcessor)]
        except Exception:  # noqa: BLE001
            bridges = []
        for processor in bridges:
            getattr(processor, method)(*args, **kwargs)
        return None

    return wrapper


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
            self._tracing: str | None = _tracing_mode(tracing) if tracing is not None else None

    @property
    def tool_risks(self) -> dict[str, str]:
        """The configured tool name → risk map (a copy)."""
        return dict(self._tool_risks)

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
                func = _wrapped_callable(tool)
                marker = getattr(func, "__otel_replay__", None) if func is not None else None
                marked = marker.get("risk") if isinstance(marker, dict) and marker.get("kind") == "tool" else None
            if marked is None:
                return default
            if marked not in _RISKS:
                _log.warning("otel-replay: tool %r is marked with unknown risk %r; treated as undeclared", name, marked)
                return default
            return str(marked)
        except Exception:  # noqa: BLE001
            _warn("read the tool's risk")
            return default

    def _targets(self) -> list[tuple[str, str, Callable[..., Any]]]:
        """(module, ``Class.method`` or function name, wrapper) of every patch."""
        run, run_sync, run_streamed = _run_wrappers()
        tool = _tool_wrapper(self)
        return [
            (_RUNNER, "AgentRunner.run", run),
            (_RUNNER, "AgentRunner.run_sync", run_sync),
            (_RUNNER, "AgentRunner.run_streamed", run_streamed),
            (_TOOL, _INVOKE, tool),
            (_TOOL_EXECUTION, _INVOKE, tool),
            (_HANDOFFS, "Handoff.__init__", _handoff_init_wrapper(self)),
            (_RESPONSES_MODEL, "OpenAIResponsesModel._get_client", _get_client_wrapper),
            *[
                (_PROVIDER, f"SynchronousMultiTracingProcessor.{m}", _bridge_only_during_replays(m))
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
            _tracing_mode(options["tracing"])

    def _instrument(self, **kwargs: Any) -> None:
        if "tool_risks" in kwargs:
            self._tool_risks = _check_risks(kwargs["tool_risks"])
        mode = _tracing_mode(kwargs.get("tracing", self._tracing))
        _guards.bind(kwargs.get("tracer_provider"))
        self._patched: list[tuple[str, str]] = []
        for module, target, wrapper in self._targets():
            try:
                wrapt.wrap_function_wrapper(module, target, wrapper)
            except Exception:  # noqa: BLE001 - an SDK version without this boundary: skip it, say so
                _log.warning(
                    "otel-replay: cannot instrument %s.%s of the OpenAI Agents SDK; those calls are not recorded",
                    module,
                    target,
                    exc_info=True,
                )
                continue
            self._patched.append((module, target))
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
            self._set_aside = [p for p in current if p is not _BRIDGE]
            provider.set_processors([_BRIDGE])  # type: ignore[list-item]  # duck-typed: see _BRIDGE
        elif _BRIDGE not in current:
            provider.register_processor(_BRIDGE)  # type: ignore[arg-type]  # duck-typed: see _BRIDGE
        self._bridged = True

    def _unbridge(self) -> None:
        from agents.tracing import get_trace_provider

        provider = get_trace_provider()
        multi = getattr(provider, "_multi_processor", None)
        current = [p for p in (getattr(multi, "_processors", ()) or ()) if p is not _BRIDGE]
        provider.set_processors(current + list(self._set_aside or []))
        self._set_aside = None
        self._bridged = False

    def _uninstrument(self, **kwargs: Any) -> None:
        for module, target in reversed(getattr(self, "_patched", [])):
            owner_name, _, method = target.rpartition(".")
            try:
                owner = sys.modules[module]
                unwrap(getattr(owner, owner_name) if owner_name else owner, method)
            except Exception:  # noqa: BLE001
                _log.warning("otel-replay: cannot uninstrument %s.%s", module, target, exc_info=True)
        self._patched = []
        _guards.bind(None)
        if getattr(self, "_bridged", False):
            _safely("remove the tracing bridge", self._unbridge)


def _register_models() -> None:
    """Register the SDK's structured tool outputs, so a recorded one is rebuilt in a replay."""
    from agents.tool import ToolOutputFileContent, ToolOutputImage, ToolOutputText

    from ..revival import register_types

    register_types((ToolOutputText, ToolOutputImage, ToolOutputFileContent))


# ------------------------------------------------------------------------------------------ replay-tool


def function_tool_of(obj: Any, module_name: str) -> Any | None:
    """The ``FunctionTool`` ``obj`` when it is a ``@function_tool`` whose function is defined in module
    ``module_name`` (so recorded data naming it cannot reach a tool imported from elsewhere); else None.
    Imports nothing: the SDK is already imported when such an object exists."""
    tool_module = sys.modules.get("agents.tool")
    cls = getattr(tool_module, "FunctionTool", None) if tool_module is not None else None
    if cls is None or not isinstance(obj, cls):
        return None
    func = _wrapped_callable(obj)
    if func is None or getattr(func, "__module__", None) != module_name:
        return None
    return obj


async def invoke_function_tool(tool: Any, arguments: Mapping[str, Any]) -> Any:
    """Call a ``FunctionTool`` with ``arguments`` the way a run does (through the SDK's invocation boundary, so
    the replay's firewall answers or refuses it); returns its output."""
    from agents.run_context import RunContextWrapper
    from agents.tool import invoke_function_tool as sdk_invoke
    from agents.tool_context import ToolContext

    raw = json.dumps(dict(arguments))
    context = ToolContext.from_agent_context(
        RunContextWrapper(context=None), "call_otel_replay_tool", tool_name=tool.name, tool_arguments=raw
    )
    return await sdk_invoke(function_tool=tool, context=context, arguments=raw)
