"""The OpenAI Agents SDK's runs, function tools, handoffs and model client, at the SDK's own boundaries (part
of :mod:`otel_replay.instrumentation.openai_agents`, whose instrumentor installs these wrappers).

Why it exists: each wrapper here turns one SDK boundary into an otel-replay run or step and, during a replay,
answers it from the recording: ``AgentRunner.run`` / ``run_sync`` / ``run_streamed`` begin an implicit run,
the function-tool invocation boundary and ``Handoff.on_invoke_handoff`` are tool steps, and the Responses
model's client is made to stream through ``responses.create(stream=True)`` so the OpenAI instrumentor sees
it. :func:`function_tool_of` and :func:`invoke_function_tool` let ``otel-replay replay-tool`` call a recorded
function tool the way a run does.

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions, run a tool or handoff the replay answered, or
import the SDK at import time. :class:`~otel_replay.recording.ReplayInterrupt` always propagates.

Process-wide state: :data:`guards`, which carries the ``tracer_provider=`` binding of the instrumentor.
"""

from __future__ import annotations

import contextvars
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from .. import semconv
from ..recording import DivergenceStop, ReplayInterrupt, begin_tool_call, end_call, end_run, in_run
from ..snapshots import qualname_of
from ._guarded import Guards, main_script
from ._guarded import enabled as _enabled
from ._sdk import ProxyBase

guards = Guards("OpenAI Agents SDK")
"""The guards of every wrapper here; the instrumentor binds its ``tracer_provider=`` on it."""
_safely, _begin = guards.safely, guards.begin

HANDOFF_TO_ATTR: Final = semconv.HANDOFF_TO
"""Attribute of a handoff step: the name of the agent the handoff hands over to."""

_NAME: Final = "openai_agents"  # otel_replay.step.instrumentation of the steps recorded here


class RiskSource(Protocol):
    """What the wrappers ask of the instrumentor: whether it is on, and a tool's declared risk."""

    @property
    def is_instrumented_by_opentelemetry(self) -> bool:
        """Whether the instrumentor is on."""
        ...

    def risk_of(self, tool: Any, default: str | None = None) -> str | None:
        """The declared risk of a function tool or handoff, else ``default``."""
        ...


def _stop(reason: str) -> ReplayInterrupt:
    """The stop of a replay that cannot answer a handoff without guessing."""
    return DivergenceStop(f"replay stopped: {reason}")


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
    return guards.begin_run(name, arguments=arguments, config=config, script=main_script())


def _final_output(result: Any) -> Any:
    """What a run's output snapshot holds: the ``final_output`` of the SDK's ``RunResult``."""
    return getattr(result, "final_output", result)


def run_wrappers() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
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


def wrapped_callable(tool: Any) -> Any:
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
    if obj is func or (obj is not None and wrapped_callable(obj) is func):
        return qualname_of(func)
    return None


def _mcp_recorded(tool: Any) -> bool:
    """Whether ``tool`` is one of an MCP server's, and the MCP instrumentor records its calls (with the
    server's annotations) itself."""
    origin = getattr(getattr(tool, "_tool_origin", None), "type", None)
    if getattr(origin, "value", origin) != "mcp":
        return False
    from . import instrumented

    return bool(instrumented("mcp"))


class _ToolParts:
    __slots__ = ("arguments", "decorated", "function", "name", "risk")

    def __init__(self, instrumentor: RiskSource, tool: Any, raw_arguments: Any) -> None:
        self.name = str(getattr(tool, "name", None) or type(tool).__name__)
        self.arguments = _parsed_arguments(raw_arguments)
        func = wrapped_callable(tool)
        marker = getattr(func, "__otel_replay__", None)
        # an @otel_replay.tool function, and an MCP tool the MCP instrumentor records, record themselves
        self.decorated = (isinstance(marker, dict) and marker.get("kind") == "tool") or _mcp_recorded(tool)
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


def tool_wrapper(instrumentor: RiskSource) -> Callable[..., Any]:
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
        handle = guards.begin_run(parts.name, arguments=parts.arguments, script=main_script())
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


def _handoff_invoker(instrumentor: RiskSource, handoff: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    """``on_invoke_handoff`` of ``handoff``, recorded as a handoff step and answered in a replay."""

    async def invoke(ctx: Any, input_json: Any = None, *rest: Any, **options: Any) -> Any:
        if not _enabled() or not instrumentor.is_instrumented_by_opentelemetry or not in_run():
            return await original(ctx, input_json, *rest, **options)
        name = str(getattr(handoff, "tool_name", None) or "handoff")
        arguments = _safely("read the handoff", _parsed_arguments, input_json or "", default={})
        risk = instrumentor.risk_of(handoff)  # None: routing, no risk recorded
        to = str(getattr(handoff, "agent_name", None) or "")
        call = _begin("handoff", begin_tool_call, name, arguments, risk=risk, instrumentation=_NAME, handoff_to=to)
        served = call.served if call is not None else None
        if served is None:
            try:
                agent = await original(ctx, input_json, *rest, **options)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            target_name = getattr(agent, "name", None)
            if call is not None and target_name is not None and str(target_name) != to:
                _safely("note the handoff target", call.step.span.set_attribute, HANDOFF_TO_ATTR, str(target_name))
            end_call(call, result={"agent": target_name})
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


def handoff_init_wrapper(instrumentor: RiskSource) -> Callable[..., Any]:
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


class _ResponsesWithoutRawStreaming(ProxyBase):
    """A client's ``responses`` resource without ``with_streaming_response``: the SDK then streams through
    ``responses.create(stream=True)``, which the OpenAI instrumentor records and answers."""

    def __getattr__(self, name: str) -> Any:
        if name == "with_streaming_response":  # hidden: the SDK falls back to create(stream=True)
            raise AttributeError(name)
        return getattr(self.__wrapped__, name)


class _ClientWithoutRawStreaming(ProxyBase):
    """An ``AsyncOpenAI`` client whose ``responses`` hides ``with_streaming_response``."""

    @property
    def responses(self) -> Any:
        """The client's responses resource, without ``with_streaming_response``."""
        return _ResponsesWithoutRawStreaming(self.__wrapped__.responses)


def get_client_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    client = wrapped(*args, **kwargs)
    if not _enabled() or isinstance(client, _ClientWithoutRawStreaming):
        return client
    return _safely("wrap the model client", _ClientWithoutRawStreaming, client, default=client)


# ------------------------------------------------------------------------------------------ replay-tool


def function_tool_of(obj: Any, module_name: str) -> Any | None:
    """The ``FunctionTool`` ``obj`` when it is a ``@function_tool`` whose function is defined in module
    ``module_name`` (so recorded data naming it cannot reach a tool imported from elsewhere); else None.
    Imports nothing: the SDK is already imported when such an object exists."""
    tool_module = sys.modules.get("agents.tool")
    cls = getattr(tool_module, "FunctionTool", None) if tool_module is not None else None
    if cls is None or not isinstance(obj, cls):
        return None
    func = wrapped_callable(obj)
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
