"""smolagents instrumentation: agent runs and ``Tool`` calls as otel-replay runs and steps.

Why it exists: an agent built on Hugging Face's smolagents (``pip install smolagents``) should be recorded step
by step and replayed in every mode without touching its code, its tools (``@tool`` functions and ``Tool``
subclasses alike) going through the same firewall as ``@otel_replay.tool`` functions. Two boundaries are
wrapped:

* runs: ``MultiStepAgent.run`` (``CodeAgent``, ``ToolCallingAgent``) begins an implicit run when none is
  current: one run per ``agent.run(task)``, its input ``{"task": task}``, its output the run's final answer. A
  ``CodeAgent``'s run is marked as one that executes model-written code (``otel_replay.run.executes_code``)
  and records the names of the tools that code may call (``otel_replay.run.code_tools``), so a dry replay can
  say so and list the tools the code called with no step of their own. ``run(..., stream=True)`` returns a
  generator: the run stays open until it is exhausted (or closed), and each of its steps runs in the run's
  own context;
* tools: ``Tool.__call__`` (how the agents, and a ``CodeAgent``'s Python executor from the model's code, call
  every tool, ``final_answer`` included) is a tool step named after the tool, with its arguments by input
  name, its risk and its output; during a replay the recorded output comes back and the tool does not run.
  The executor runs the model's code in a worker thread: the recorder carries the run's context there
  (:mod:`otel_replay.recording.threads`), so those calls are steps of the run.

Model calls are made by smolagents' model classes; those built on the ``openai`` client (``OpenAIServerModel``
/ ``OpenAIModel``) are recorded and answered by the OpenAI instrumentor, which this instrumentor turns on too
(and off again when it did so).

Risk of a tool: ``tool_risks={name: risk}`` given to :meth:`SmolagentsInstrumentor.instrument`, else an
``otel_replay_risk`` attribute on the tool (:func:`declare_risk`), else the recorder's name rule (``send_…``,
``delete_…`` are ``high``). A tool whose ``forward`` is an ``@otel_replay.tool`` function records itself.

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions, run a tool the replay answered, or import
smolagents before :meth:`SmolagentsInstrumentor.instrument` is called. :class:`ReplayInterrupt` propagates.

Process-wide state: the ``Tool.__call__`` and ``MultiStepAgent.run`` methods it wraps, whether it turned the
OpenAI instrumentor on, and the ``tracer_provider=`` binding of its guards.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from opentelemetry import trace

from .. import semconv
from ..recording import begin_tool_call, end_call, end_run, in_run
from ..snapshots import qualname_of
from ._guarded import RISKS as _RISKS
from ._guarded import FrameworkInstrumentor, Guards, answered, main_script, plain_json
from ._guarded import enabled as _enabled

__all__ = ["RISK_ATTRIBUTE", "SmolagentsInstrumentor", "declare_risk"]

_log = logging.getLogger("otel_replay")
guards = Guards("smolagents")
_safely = guards.safely

_instruments: Final = ("smolagents >= 1.0",)
"""The smolagents versions this instrumentor supports (``opentelemetry-instrument`` checks them)."""

RISK_ATTRIBUTE: Final = "otel_replay_risk"
"""Attribute of a smolagents ``Tool`` that declares its risk (see :func:`declare_risk`)."""

_NAME: Final = "smolagents"  # otel_replay.step.instrumentation of the steps recorded here
_TARGETS: Final = (("smolagents.tools", "Tool.__call__"), ("smolagents.agents", "MultiStepAgent.run"))


def declare_risk(tool: Any, risk: str) -> Any:
    """Declare the risk (``read``, ``write`` or ``high``) of a smolagents ``Tool``; returns it. ``tool_risks``
    given to the instrumentor wins over it. ValueError for another risk."""
    if risk not in _RISKS:
        raise ValueError(f"risk must be one of {sorted(_RISKS)}, got {risk!r}")
    setattr(tool, RISK_ATTRIBUTE, risk)
    return tool


# ---------------------------------------------------------------------------------------------- runs


def executes_code(agent: Any) -> bool:
    """Whether ``agent`` runs model-written code (a smolagents ``CodeAgent``)."""
    agents = sys.modules.get("smolagents.agents")
    code_agent = getattr(agents, "CodeAgent", None) if agents is not None else None
    return code_agent is not None and isinstance(agent, code_agent)


def _tool_names(agent: Any) -> list[str]:
    tools = getattr(agent, "tools", None)
    return sorted(str(n) for n in tools) if isinstance(tools, dict) else []


def _begin(agent: Any, task: Any) -> Any:
    name = getattr(agent, "name", None)
    name = name if isinstance(name, str) and name else type(agent).__name__
    model = getattr(getattr(agent, "model", None), "model_id", None)
    code = executes_code(agent)
    config: dict[str, Any] = {"agent": type(agent).__name__, "tools": _tool_names(agent)}
    if isinstance(model, str):
        config["model"] = model
    handle = guards.begin_run(name, arguments={"task": task}, config=config, script=main_script())
    if handle is not None and code:
        span = trace.get_current_span()  # the run's root, current right after begin_run
        _safely("mark the code agent", span.set_attribute, semconv.RUN_EXECUTES_CODE, True)
        _safely("note the code tools", span.set_attribute, semconv.RUN_CODE_TOOLS, _tool_names(agent))
    return handle


def _task(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return args[0] if args else kwargs.get("task")


def _output(result: Any) -> Any:
    """A run's output: the final answer (``RunResult.output`` when the full result was asked for)."""
    out = getattr(result, "output", result) if type(result).__name__ == "RunResult" else result
    return out if plain_json(out) else str(out)


def _stream(ctx: contextvars.Context, handle: Any, steps: Iterator[Any]) -> Iterator[Any]:
    """The steps of ``run(stream=True)``, each made in the run's context; the run ends with the generator."""
    last: Any = None
    try:
        while True:
            try:
                step = ctx.run(next, steps)
            except StopIteration:
                break
            last = step
            yield step
    except GeneratorExit:  # the caller closed the stream (or dropped it): the run ends without an answer
        close = getattr(steps, "close", None)
        if callable(close):
            _safely("close the agent's steps", ctx.run, close)
        ctx.run(end_run, handle, result=None)
        raise
    except BaseException as exc:
        ctx.run(end_run, handle, exc=exc)
        raise
    ctx.run(end_run, handle, result=_output(getattr(last, "output", last)))


def _run_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if in_run() or not _enabled():
        return wrapped(*args, **kwargs)
    if kwargs.get("stream") or (len(args) > 1 and args[1] is True):  # run(task, stream=True) / run(task, True)
        ctx = contextvars.copy_context()
        handle = ctx.run(_begin, instance, _task(args, kwargs))
        if handle is None:
            return wrapped(*args, **kwargs)
        try:
            steps = ctx.run(wrapped, *args, **kwargs)
        except BaseException as exc:
            ctx.run(end_run, handle, exc=exc)
            raise
        return _stream(ctx, handle, steps)
    handle = _begin(instance, _task(args, kwargs))
    if handle is None:
        return wrapped(*args, **kwargs)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=_safely("read the final answer", _output, result))
    return result


# --------------------------------------------------------------------------------------------- tools


def _arguments(tool: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments by the tool's input names (as ``Tool.__call__`` reads them)."""
    kwargs = {k: v for k, v in kwargs.items() if k != "sanitize_inputs_outputs"}
    inputs = list(getattr(tool, "inputs", None) or ())
    if len(args) == 1 and not kwargs and isinstance(args[0], dict) and all(k in inputs for k in args[0]):
        return dict(args[0])
    named = dict(zip(inputs, args, strict=False))
    if len(args) > len(inputs):
        named["args"] = list(args[len(inputs) :])
    return {**named, **kwargs}


def _function_of(tool: Any, forward: Any) -> str | None:
    """``module:qualname`` of what defines the tool: its ``Tool`` subclass, or the function behind a ``@tool``
    (whose class smolagents makes inside ``tool()``); None when neither is at module level."""
    for obj in (type(tool), forward):
        qualname = getattr(obj, "__qualname__", "") or ""
        if qualname and "<" not in qualname and getattr(obj, "__module__", None):
            return qualname_of(obj)
    return None


class _Parts:
    __slots__ = ("arguments", "decorated", "function", "name", "risk")

    def __init__(self, instrumentor: SmolagentsInstrumentor, tool: Any, args: tuple[Any, ...], kw: Any) -> None:
        self.name = str(getattr(tool, "name", None) or type(tool).__name__)
        self.arguments = _arguments(tool, args, kw)
        forward = getattr(tool, "forward", None)
        func = getattr(forward, "__func__", forward)
        marker = getattr(func, "__otel_replay__", None)
        self.decorated = isinstance(marker, dict) and marker.get("kind") == "tool"
        self.risk = instrumentor.risk_of(tool)
        self.function = _function_of(tool, func)


def _tool_wrapper(instrumentor: SmolagentsInstrumentor) -> Callable[..., Any]:
    """Wrapper of ``Tool.__call__(*args, sanitize_inputs_outputs=False, **kwargs)``."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled() or not in_run():
            return wrapped(*args, **kwargs)
        parts = _safely("read the tool call", _Parts, instrumentor, instance, args, kwargs)
        if parts is None or parts.decorated:  # an @otel_replay.tool forward records itself
            return wrapped(*args, **kwargs)
        call = guards.begin(
            "tool",
            begin_tool_call,
            parts.name,
            parts.arguments,
            risk=parts.risk,
            function=parts.function,
            instrumentation=_NAME,
        )
        served = call.served if call is not None else None
        if served is None:
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                end_call(call, exc=exc)
                raise
            end_call(call, result=result if plain_json(result) else _safely("encode the output", str, result))
            return result
        return answered(call)

    return wrapper


# -------------------------------------------------------------------------------------- instrumentor


class SmolagentsInstrumentor(FrameworkInstrumentor):
    """Records smolagents runs (``CodeAgent`` / ``ToolCallingAgent`` ``.run``) and ``Tool`` calls as otel-replay
    runs and tool steps, and answers the tools from the recording during a replay.

    Options (constructor or :meth:`instrument`): ``tool_risks`` maps tool names to ``read`` / ``write`` /
    ``high``; a tool not in the map takes the risk declared on it (:func:`declare_risk`), else the recorder's
    name rule. :meth:`instrument` also takes ``tracer_provider``. The OpenAI instrumentor is turned on with it
    (smolagents' OpenAI models call the ``openai`` client), unless it is on already. Bad values raise
    ValueError. A singleton, like every ``BaseInstrumentor``.
    """

    guards = guards
    framework = "smolagents"
    instruments = _instruments

    def risk_of(self, tool: Any) -> str | None:
        """The declared risk of a tool: ``tool_risks`` by its name, else its ``otel_replay_risk`` attribute,
        else None (the recorder's name rule). Never raises."""
        try:
            name = str(getattr(tool, "name", None) or "")
            if name in self._tool_risks:
                return self._tool_risks[name]
            marked = getattr(tool, RISK_ATTRIBUTE, None)
            if marked is not None and marked not in _RISKS:
                _log.warning("otel-replay: tool %r is marked with unknown risk %r; treated as undeclared", name, marked)
                return None
            return str(marked) if marked is not None else None
        except Exception:  # noqa: BLE001
            guards.warn("read the tool's risk")
            return None

    def wrappers(self) -> list[tuple[str, str, Callable[..., Any]]]:
        """``Tool.__call__`` and ``MultiStepAgent.run``."""
        wrappers = {"Tool.__call__": _tool_wrapper(self), "MultiStepAgent.run": _run_wrapper}
        return [(module, target, wrappers[target]) for module, target in _TARGETS]
