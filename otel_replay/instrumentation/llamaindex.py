"""LlamaIndex instrumentation: agent workflow runs and tool calls as otel-replay runs and steps.

Why it exists: an agent built on LlamaIndex (``pip install llama-index-core``, module ``llama_index.core``) should
be recorded step by step and replayed in every mode without touching its code, its tools going through the same
firewall as ``@otel_replay.tool`` functions. This module wraps LlamaIndex where a whole call is visible as
LlamaIndex's own objects, and answers each tool call from the recording at that same boundary:

* runs: ``BaseWorkflowAgent.run`` (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``) and ``AgentWorkflow.run``
  outside any run begin an implicit run: one run per agent invocation, its input ``{"input": <user_msg>}``, its
  output the text of the agent's final response. ``run()`` returns a handler at once and the workflow goes on in
  tasks; the run lives in a context of its own, which those tasks copy, and ends when the handler's result task
  does (the stream consumed, or the handler awaited); the caller's context is left as it was;
* tools: ``FunctionTool.call`` / ``acall``, ``QueryEngineTool.call`` / ``acall`` and ``RetrieverTool.call`` /
  ``acall`` (what an agent's tool step calls) record a tool step: the tool's name, the arguments it was called
  with (the workflow ``Context`` a tool asks for left out), the tool's risk and its output as
  ``{"content", "raw_output", "is_error"}``. During a replay the recorded output comes back as a ``ToolOutput``
  and the tool does not run. A tool called outside any run is an implicit run of one step;
* model calls go through the ``openai`` client (``llama-index-llms-openai``) and are recorded and answered by the
  OpenAI instrumentor (:mod:`otel_replay.instrumentation.openai`).

Risk of a tool: ``tool_risks={name: risk}`` given to :meth:`LlamaIndexInstrumentor.instrument`, else an
``otel_replay_risk`` attribute on the tool (:func:`declare_risk`), else the recorder's name heuristic
(``send_…``, ``delete_…`` are ``high``). A ``FunctionTool`` whose function is an ``@otel_replay.tool`` is recorded
by that decorator instead (never twice).

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions, run a tool the replay answered, or import
LlamaIndex's agent modules before the application does (they are patched right after their own import).
:class:`~otel_replay.recording.ReplayInterrupt` (a ``BaseException``) always propagates: LlamaIndex's agents
catch only ``Exception`` around a tool call.

Process-wide state: the LlamaIndex classes it wraps, the import hooks of the agent modules, and the
``tracer_provider=`` binding it gives its guards (:data:`guards`).
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Callable, Collection, Mapping
from types import ModuleType
from typing import Any, Final

import wrapt
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from .. import semconv
from ..recording import ReplayInterrupt, begin_tool_call, end_call, end_run, in_run
from . import _lazy
from ._guarded import RISKS as _RISKS
from ._guarded import Guards, answered, main_script, plain_json
from ._guarded import check_risks as _check_risks
from ._guarded import enabled as _enabled

__all__ = ["RISK_ATTRIBUTE", "LlamaIndexInstrumentor", "declare_risk", "guards"]

_log = logging.getLogger("otel_replay")

guards = Guards("LlamaIndex")
"""The guards of every wrapper here; the instrumentor binds its ``tracer_provider=`` on it."""
_safely, _begin = guards.safely, guards.begin

_NAME: Final = "llamaindex"  # otel_replay.step.instrumentation of the steps recorded here

_instruments: Final = ("llama-index-core >= 0.14",)
"""The LlamaIndex versions this instrumentor supports (``opentelemetry-instrument`` checks them)."""

RISK_ATTRIBUTE: Final = "otel_replay_risk"
"""Attribute of a LlamaIndex tool that declares its risk (see :func:`declare_risk`)."""

_TOOLS: Final = (
    ("llama_index.core.tools.function_tool", "FunctionTool"),
    ("llama_index.core.tools.query_engine", "QueryEngineTool"),
    ("llama_index.core.tools.retriever_tool", "RetrieverTool"),
)
"""(module, class) of the tools whose ``call`` / ``acall`` are tool steps (imported with ``llama_index.core``)."""

_WORKERS: Final = ("workflows.plugins.basic", "as_step_worker_functions")
"""Where LlamaIndex's workflow runtime (``llama-index-workflows``) makes the step workers of a workflow: each is
wrapped so that a replay's stop inside a step ends the workflow instead of leaving it waiting forever."""

_AGENTS: Final = (
    ("llama_index.core.agent.workflow.base_agent", "BaseWorkflowAgent"),
    ("llama_index.core.agent.workflow.multi_agent_workflow", "AgentWorkflow"),
)
"""(module, class) of the agents whose ``run`` begins a run; patched after the application imports them."""


def declare_risk(tool: Any, risk: str) -> Any:
    """Declare the risk (``read``, ``write`` or ``high``) of a LlamaIndex tool; returns it. ``tool_risks`` given to
    the instrumentor wins over it. ValueError for another risk."""
    if risk not in _RISKS:
        raise ValueError(f"risk must be one of {sorted(_RISKS)}, got {risk!r}")
    object.__setattr__(tool, RISK_ATTRIBUTE, risk)
    return tool


# ---------------------------------------------------------------------------------------------- runs


def _text(message: Any) -> Any:
    """A user message as the run's input: a text as it is, a ``ChatMessage`` as its text."""
    if message is None or isinstance(message, str):
        return message
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else str(message)


def _run_parts(agent: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, dict[str, Any], Any]:
    """``agent.run(user_msg, ...)`` → the run's name, recorded input and config."""
    message = kwargs.get("user_msg")
    if message is None and args and type(args[0]).__name__ != "Context":
        message = args[0]
    name = getattr(agent, "name", None)
    if not isinstance(name, str) or not name:
        root = getattr(agent, "root_agent", None)
        name = root if isinstance(root, str) and root else type(agent).__name__
    config: dict[str, Any] = {"agent": name, "workflow": type(agent).__name__}
    model = getattr(getattr(agent, "llm", None), "model", None)
    if isinstance(model, str):
        config["model"] = model
    return name, {"input": _text(message)}, config


def _begin_implicit_run(agent: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    parts = _safely("read the run's input", _run_parts, agent, args, kwargs)
    if parts is None:
        return None
    name, arguments, config = parts
    handle = guards.begin_run(name, arguments=arguments, config=config, script=main_script())
    if handle is not None and _executes_code(agent):
        span = trace.get_current_span()  # the run's root, current right after begin_run
        _safely("mark the code agent", span.set_attribute, semconv.RUN_EXECUTES_CODE, True)
        # No code tools: the code runs only inside the agent's ``execute`` tool step (high risk by its name), so
        # a replay answers the whole execution or runs it with its approval; the functions the code calls are
        # not checked one by one (they are no steps, and an answered execution calls none of them).
        _safely("note the code tools", span.set_attribute, semconv.RUN_CODE_TOOLS, [])
    return handle


def _executes_code(agent: Any) -> bool:
    """Whether ``agent`` runs model-written code (a LlamaIndex ``CodeActAgent``)."""
    workflow = sys.modules.get("llama_index.core.agent.workflow")
    code_act = getattr(workflow, "CodeActAgent", None) if workflow is not None else None
    return code_act is not None and isinstance(agent, code_act)


def _final_output(stop: Any) -> Any:
    """The run's output: the text of the agent's final response (``AgentOutput.response``)."""
    result = getattr(stop, "result", stop)
    response = getattr(result, "response", None)
    content = getattr(response, "content", None)
    if isinstance(content, str):
        return content
    return result if result is None or isinstance(result, (str, int, float, bool)) else str(result)


def _end_with_task(ctx: contextvars.Context, handle: Any, handler: Any) -> bool:
    """End the run (in its own context) when the handler's result task is done."""
    task = handler._result_task

    def done(finished: Any) -> None:
        exc: BaseException | None = None
        if finished.cancelled():
            import asyncio

            exc = asyncio.CancelledError()
        else:
            exc = finished.exception()
        if isinstance(exc, ReplayStopInStep):
            exc = exc.stop
        if exc is not None:
            ctx.run(end_run, handle, exc=exc)
        else:
            ctx.run(end_run, handle, result=_safely("read the final output", _final_output, finished.result()))

    task.add_done_callback(done)
    return True


def _raise_stops(handler: Any) -> None:
    """Make ``await handler`` raise a replay's stop itself where the workflow raises it as
    :class:`ReplayStopInStep` (the handler's own ``_await_result``, overridden on this handler only)."""
    original = handler._await_result

    async def await_result() -> Any:
        try:
            return await original()
        except ReplayStopInStep as failed:
            raise failed.stop from None

    handler._await_result = await_result


def run_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Wrapper of ``BaseWorkflowAgent.run`` / ``AgentWorkflow.run``: an implicit run outside any run; inside
    one, only a replay's stop is made to reach the caller's ``await handler`` as itself."""
    if not _enabled():
        return wrapped(*args, **kwargs)
    if in_run():
        handler = wrapped(*args, **kwargs)
        _safely("follow the workflow run", _raise_stops, handler)
        return handler
    ctx = contextvars.copy_context()
    handle = ctx.run(_begin_implicit_run, instance, args, kwargs)
    if handle is None:
        return wrapped(*args, **kwargs)
    try:
        handler = ctx.run(wrapped, *args, **kwargs)
    except BaseException as exc:
        ctx.run(end_run, handle, exc=exc)
        raise
    if not _safely("follow the workflow run", _end_with_task, ctx, handle, handler, default=False):
        ctx.run(end_run, handle, result=None)
    _safely("follow the workflow run", _raise_stops, handler)
    return handler


class ReplayStopInStep(Exception):
    """A replay's stop (:class:`~otel_replay.recording.ReplayInterrupt`) raised inside a workflow step, carried as
    an ``Exception``: the workflow runtime fails the run with it (a ``BaseException`` would end the step's task
    without the runtime noticing, and the run would wait forever). ``stop`` is the replay's stop."""

    def __init__(self, stop: ReplayInterrupt) -> None:
        super().__init__(str(stop))
        self.stop = stop


def _stopping_worker(worker: Any) -> Any:
    """A step worker whose replay stop fails the step as :class:`ReplayStopInStep`."""

    async def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return await worker(*args, **kwargs)
        except ReplayInterrupt as stop:
            raise ReplayStopInStep(stop) from stop

    return run


def workers_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Wrapper of the workflow runtime's ``as_step_worker_functions(workflow)``: every step worker it makes is
    a :func:`_stopping_worker`."""
    workers = wrapped(*args, **kwargs)
    if not isinstance(workers, dict):
        return workers
    return {name: _stopping_worker(worker) for name, worker in workers.items()}


# --------------------------------------------------------------------------------------------- tools


_HANDOFF: Final = ("llama_index.core.agent.workflow.multi_agent_workflow", "handoff")
"""Module and name of the function behind ``AgentWorkflow``'s generated handoff tool."""


def _handoff_to(tool: Any, kwargs: Mapping[str, Any]) -> str | None:
    """The agent an ``AgentWorkflow`` handoff tool call hands to, else None (a tool of the user's)."""
    fn = getattr(tool, "_async_fn", None)
    if (getattr(fn, "__module__", None), getattr(fn, "__name__", None)) != _HANDOFF:
        return None
    to = kwargs.get("to_agent")
    return str(to) if to is not None else ""


class _ToolParts:
    __slots__ = ("arguments", "decorated", "handoff_to", "name", "risk")

    def __init__(self, instrumentor: LlamaIndexInstrumentor, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]):
        metadata = getattr(tool, "metadata", None)
        get_name = getattr(metadata, "get_name", None)
        self.name = str(get_name() if callable(get_name) else type(tool).__name__)
        context_param = getattr(tool, "ctx_param_name", None)
        arguments = {k: v for k, v in kwargs.items() if k != context_param}
        if args:
            if len(args) == 1 and not arguments:
                arguments = {"input": args[0]}
            else:
                arguments["args"] = list(args)
        self.arguments = arguments
        marker = getattr(getattr(tool, "_fn", None), "__otel_replay__", None)
        self.decorated = isinstance(marker, dict) and marker.get("kind") == "tool"
        self.risk = instrumentor.risk_of(tool, self.name)
        self.handoff_to = _handoff_to(tool, kwargs)


def _recordable_output(output: Any) -> Any:
    """A ``ToolOutput`` as the recording keeps it: its text, its raw output when plain JSON (else the text),
    and whether it is an error."""
    content = str(getattr(output, "content", "") or "")
    raw = getattr(output, "raw_output", None)
    return {
        "content": content,
        "raw_output": raw if plain_json(raw) else content,
        "is_error": bool(getattr(output, "is_error", False)),
    }


def _tool_output(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The ``ToolOutput`` a replay hands the agent for a recorded output."""
    from llama_index.core.tools.types import ToolOutput

    recorded = value if isinstance(value, dict) else {"content": value, "raw_output": value}
    content = recorded.get("content")
    return ToolOutput(
        tool_name=name,
        content=str(content) if content not in (None, "") else None,
        raw_input={"args": args, "kwargs": kwargs},
        raw_output=recorded.get("raw_output"),
        is_error=bool(recorded.get("is_error", False)),
    )


def _begin_tool(parts: _ToolParts) -> Any:
    return _begin(
        "tool",
        begin_tool_call,
        parts.name,
        parts.arguments,
        risk=parts.risk,
        instrumentation=_NAME,
        handoff_to=parts.handoff_to,
    )


async def _route(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], parts: _ToolParts) -> None:
    """A handoff answered from the recording still hands over: the workflow learns the next agent from its
    context store, which LlamaIndex's own ``handoff`` function sets (it reads and writes that store only, no
    effect outside the workflow), so it runs; its output is the recording's."""
    if parts.handoff_to is not None:
        await wrapped(*args, **kwargs)


def _tool_wrappers(instrumentor: LlamaIndexInstrumentor) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Wrappers of a tool's ``call`` (sync) and ``acall`` (async)."""

    def sync_body(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], parts: _ToolParts) -> Any:
        call = _begin_tool(parts)
        served = call.served if call is not None else None
        if served is None:
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            if call is not None:
                end_call(call, result=_safely("encode the tool output", _recordable_output, result))
            return result
        return _tool_output(parts.name, answered(call), args, kwargs)

    async def async_body(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], parts: _ToolParts) -> Any:
        call = _begin_tool(parts)
        served = call.served if call is not None else None
        if served is None:
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            if call is not None:
                end_call(call, result=_safely("encode the tool output", _recordable_output, result))
            return result
        value = answered(call)
        await _route(wrapped, args, kwargs, parts)
        return _tool_output(parts.name, value, args, kwargs)

    def sync_in_run(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], parts: _ToolParts) -> Any:
        if in_run():
            return sync_body(wrapped, args, kwargs, parts)
        handle = guards.begin_run(parts.name, arguments=parts.arguments, script=main_script())
        try:
            result = sync_body(wrapped, args, kwargs, parts)
        except BaseException as exc:
            end_run(handle, exc=exc)
            raise
        end_run(handle, result=_safely("read the tool output", _final_tool_text, result))
        return result

    async def async_in_run(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], parts: _ToolParts) -> Any:
        if in_run():
            return await async_body(wrapped, args, kwargs, parts)
        handle = guards.begin_run(parts.name, arguments=parts.arguments, script=main_script())
        try:
            result = await async_body(wrapped, args, kwargs, parts)
        except BaseException as exc:
            end_run(handle, exc=exc)
            raise
        end_run(handle, result=_safely("read the tool output", _final_tool_text, result))
        return result

    def parts_of(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _ToolParts | None:
        if not _enabled():
            return None
        parts: _ToolParts | None = _safely("read the tool call", _ToolParts, instrumentor, instance, args, kwargs)
        if parts is None or parts.decorated:  # an @otel_replay.tool function records itself
            return None
        return parts

    def call(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        parts = parts_of(instance, args, kwargs)
        if parts is None:
            return wrapped(*args, **kwargs)
        return sync_in_run(wrapped, args, kwargs, parts)

    def acall(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        parts = parts_of(instance, args, kwargs)
        if parts is None:
            return wrapped(*args, **kwargs)
        return async_in_run(wrapped, args, kwargs, parts)

    return call, acall


def _final_tool_text(output: Any) -> Any:
    return str(getattr(output, "content", output))


# -------------------------------------------------------------------------------------- instrumentor


def _unwrap(owner: Any, method: str) -> None:
    """Put back the function our wrapper of ``owner.method`` wraps. Read from the class's own ``__dict__``:
    ``getattr`` on the class gives a wrapper bound to the class (wrapt 2), whose ``__wrapped__`` is not the
    original function."""
    current = owner.__dict__.get(method)
    original = getattr(current, "__wrapped__", None)
    if original is not None:
        setattr(owner, method, original)


def _instrument_openai(options: dict[str, Any]) -> None:
    from . import instrument_one

    instrument_one("openai", options, asked=False)


class LlamaIndexInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records LlamaIndex agent workflow runs and tool calls as otel-replay runs and steps, and answers the tool
    calls from the recording during a replay.

    Options (constructor or :meth:`instrument`): ``tool_risks`` maps tool names to ``read`` / ``write`` /
    ``high``; a tool not in the map takes the risk declared on it (:func:`declare_risk`), else the recorder's
    name heuristic. :meth:`instrument` also takes ``tracer_provider``: the runs and tool steps it records go to
    that provider instead of the current runtime's (see ``docs/instrumentation.md``). Bad values raise
    ValueError.

    Like every ``BaseInstrumentor`` it is a singleton: constructing it again keeps the current options unless
    new ones are given.
    """

    def __init__(self, *, tool_risks: Mapping[str, str] | None = None) -> None:
        if tool_risks is not None or not hasattr(self, "_tool_risks"):
            self._tool_risks: dict[str, str] = _check_risks(tool_risks)

    def instrumentation_dependencies(self) -> Collection[str]:
        """The LlamaIndex requirement checked by ``instrument()`` and ``opentelemetry-instrument``."""
        return _instruments

    def check_options(self, **options: Any) -> None:
        """Raise ValueError for options :meth:`instrument` would refuse (``tool_risks``), without instrumenting:
        ``orp.instrument()`` checks them before it arms the instrumentor for a LlamaIndex not imported yet."""
        if "tool_risks" in options:
            _check_risks(options["tool_risks"])

    def risk_of(self, tool: Any, name: str) -> str | None:
        """The declared risk of a tool: from ``tool_risks`` by its name, else its ``otel_replay_risk``
        attribute; None when undeclared (the recorder's name heuristic then decides). Never raises."""
        try:
            if name in self._tool_risks:
                return self._tool_risks[name]
            marked = getattr(tool, RISK_ATTRIBUTE, None)
            if marked is None:
                return None
            if marked not in _RISKS:
                _log.warning("otel-replay: tool %r is marked with unknown risk %r; treated as undeclared", name, marked)
                return None
            return str(marked)
        except Exception:  # noqa: BLE001
            guards.warn("read the tool's risk")
            return None

    def _instrument(self, **kwargs: Any) -> None:
        if "tool_risks" in kwargs:
            self._tool_risks = _check_risks(kwargs["tool_risks"])
        guards.bind(kwargs.get("tracer_provider"))
        self._patched: list[tuple[str, str, str]] = []
        call, acall = _tool_wrappers(self)
        self._patch(
            [(module, cls, method, w) for module, cls in _TOOLS for method, w in (("call", call), ("acall", acall))]
        )
        # the agent modules are patched after their own import (at once when imported already), never imported here
        self._hooks = [_lazy.when_imported(module, self._patch_agent(module, cls)) for module, cls in _AGENTS]
        # LlamaIndex's OpenAI LLM calls the openai SDK: its model calls are steps only when that SDK is
        # instrumented too (armed when not imported yet; skipped quietly when it is not installed)
        provider = {"tracer_provider": kwargs["tracer_provider"]} if "tracer_provider" in kwargs else {}
        _safely("instrument the openai SDK", _instrument_openai, provider)

    def _patch_agent(self, module: str, cls: str) -> Callable[[ModuleType], None]:
        def patch(_module: ModuleType) -> None:
            targets = [(module, cls, "run", run_wrapper)]
            if not any(m == _WORKERS[0] for m, _, _ in self._patched):  # the runtime the agents' workflows run on
                targets.append((_WORKERS[0], "", _WORKERS[1], workers_wrapper))
            self._patch(targets)

        return patch

    def _patch(self, targets: list[tuple[str, str, str, Callable[..., Any]]]) -> None:
        for module, cls, method, wrapper in targets:
            try:
                wrapt.wrap_function_wrapper(module, f"{cls}.{method}" if cls else method, wrapper)
            except Exception:  # noqa: BLE001 - a LlamaIndex version without this boundary: skip it, say so
                _log.warning(
                    "otel-replay: cannot instrument %s:%s of LlamaIndex; those calls are not recorded or answered",
                    module,
                    f"{cls}.{method}" if cls else method,
                    exc_info=True,
                )
                continue
            self._patched.append((module, cls, method))

    def _uninstrument(self, **kwargs: Any) -> None:
        for hook in getattr(self, "_hooks", []):
            _lazy.cancel(hook)
        self._hooks = []
        for module, cls, method in reversed(getattr(self, "_patched", [])):
            try:
                owner = sys.modules[module]
                _unwrap(getattr(owner, cls) if cls else owner, method)
            except Exception:  # noqa: BLE001
                _log.warning("otel-replay: cannot uninstrument %s.%s.%s", module, cls, method, exc_info=True)
        self._patched = []
        guards.bind(None)
