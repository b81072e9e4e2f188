"""Pydantic AI instrumentation: agent runs and function tool calls as otel-replay runs and steps.

Why it exists: an agent built on Pydantic AI (``pip install pydantic-ai``) should be recorded step by step and
replayed in every mode without touching its code: its ``@agent.tool_plain`` / ``@agent.tool`` functions and
``Tool(...)`` / ``FunctionToolset`` tools go through the same firewall as ``@otel_replay.tool`` functions. Two
boundaries are wrapped:

* runs: ``AbstractAgent.run`` (awaited), ``AbstractAgent.run_sync`` and ``iter`` begin an implicit run when none
  is current: one run per call, named after the agent (``Agent(name=...)``, else ``"Agent"``), its input
  ``{"user_prompt": ...}`` (so ``--app module:agent.run_sync`` calls it again), its output the run's
  ``output`` (the text, or a structured output as plain data). ``run_sync`` runs ``run`` inside: one run;
* tools: ``FunctionToolset.call_tool`` (every function tool of every agent, whatever the decorator) is a tool
  step named after the tool, with the arguments the model gave it and its risk; during a replay the recorded
  result comes back and the function does not run.

Model calls are made by Pydantic AI's model classes; those on the ``openai`` client (``OpenAIChatModel``,
``OpenAIResponsesModel``) are recorded and answered by the OpenAI instrumentor, which this instrumentor turns
on too (and off again when it did so). Pydantic AI's own OpenTelemetry instrumentation (``instrument=True``,
logfire) adds spans of its own on the same provider, not runs or steps.

Risk of a tool: ``tool_risks={name: risk}`` given to :meth:`PydanticAIInstrumentor.instrument`, else an
``otel_replay_risk`` key in the tool's ``metadata`` (``@agent.tool_plain(metadata={"otel_replay_risk":
"write"})``), else the recorder's name rule (``send_…``, ``delete_…`` are ``high``). A tool whose function is
an ``@otel_replay.tool`` records itself.

``AbstractAgent.iter`` (and ``Agent.iter``, which overrides it) outside a run begins one too, from entering the
context manager to leaving it: ``iter`` itself, and ``run_stream`` / ``run_stream_sync`` / ``run_stream_events``,
which run it. Not covered yet: MCP toolsets and other toolsets' own ``call_tool``.

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions, run a tool the replay answered, or import
Pydantic AI before :meth:`PydanticAIInstrumentor.instrument` is called. :class:`ReplayInterrupt` propagates.

Process-wide state: the methods it wraps, whether it turned the OpenAI instrumentor on, and the
``tracer_provider=`` binding of its guards.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

from ..recording import begin_tool_call, end_call, end_run, in_run
from ..recording.results import register_result
from ..snapshots import qualname_of
from ._guarded import RISKS as _RISKS
from ._guarded import FrameworkInstrumentor, Guards, answered, main_script, plain_json
from ._guarded import enabled as _enabled

__all__ = ["RISK_METADATA_KEY", "PydanticAIInstrumentor"]

_log = logging.getLogger("otel_replay")
guards = Guards("Pydantic AI")

_instruments: Final = ("pydantic-ai-slim >= 1.0",)
"""The Pydantic AI versions this instrumentor supports (``opentelemetry-instrument`` checks them)."""

RISK_METADATA_KEY: Final = "otel_replay_risk"
"""Key in a tool's ``metadata`` that declares its risk (``read``, ``write`` or ``high``)."""

_NAME: Final = "pydantic_ai"  # otel_replay.step.instrumentation of the steps recorded here
_TARGETS: Final = (
    ("pydantic_ai.agent.abstract", "AbstractAgent.run"),
    ("pydantic_ai.agent.abstract", "AbstractAgent.run_sync"),
    ("pydantic_ai.agent.abstract", "AbstractAgent.iter"),
    ("pydantic_ai.agent", "Agent.iter"),
    ("pydantic_ai.toolsets.function", "FunctionToolset.call_tool"),
)


# ---------------------------------------------------------------------------------------------- runs


def _prompt(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return args[0] if args else kwargs.get("user_prompt")


def _begin(agent: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    name = getattr(agent, "name", None)
    name = name if isinstance(name, str) and name else "Agent"
    config: dict[str, Any] = {"agent": type(agent).__name__}
    model = getattr(getattr(agent, "model", None), "model_name", None)
    if isinstance(model, str):
        config["model"] = model
    return guards.begin_run(name, arguments={"user_prompt": _prompt(args, kwargs)}, config=config, script=main_script())


def _output(result: Any) -> Any:
    """A run's output: ``AgentRunResult.output``, as plain data (a pydantic model dumped), else its text."""
    out = getattr(result, "output", result)
    dump = getattr(out, "model_dump", None)
    if callable(dump):
        out = dump(mode="json")
    return out if plain_json(out) else str(out)


def _run_sync_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if in_run() or not _enabled():
        return wrapped(*args, **kwargs)
    handle = _begin(instance, args, kwargs)
    if handle is None:
        return wrapped(*args, **kwargs)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=result)  # recorded as its output (see _register_result)
    return result


def _run_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if in_run() or not _enabled():
        return wrapped(*args, **kwargs)

    async def run() -> Any:  # the run begins where the coroutine runs: in the caller's task
        handle = _begin(instance, args, kwargs)
        if handle is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            end_run(handle, exc=exc)
            raise
        end_run(handle, result=result)
        return result

    return run()


def _iter_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``agent.iter(...)`` (an async context manager; ``run_stream``, ``run_stream_sync`` and
    ``run_stream_events`` run it too) outside a run: one implicit run from entering it to leaving it, its output
    the ``AgentRun``'s result (None when the caller left before the end)."""
    if in_run() or not _enabled():
        return wrapped(*args, **kwargs)
    return _iter_run(instance, wrapped, args, kwargs)


@contextlib.asynccontextmanager
async def _iter_run(agent: Any, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    handle = _begin(agent, args, kwargs)  # in the caller's context: its loop over the run's nodes is in the run
    if handle is None:
        async with wrapped(*args, **kwargs) as agent_run:
            yield agent_run
        return
    try:
        async with wrapped(*args, **kwargs) as agent_run:
            yield agent_run
    except BaseException as exc:
        end_run(handle, exc=exc)
        raise
    end_run(handle, result=getattr(agent_run, "result", None))


def _register_result() -> None:
    """A run that returns an ``AgentRunResult`` (the implicit run, and a replay's run of ``agent.run_sync``) records
    its :func:`_output` (see :mod:`otel_replay.recording.results`)."""
    from pydantic_ai.agent import AgentRunResult

    register_result(AgentRunResult, _output)


# --------------------------------------------------------------------------------------------- tools


class _Parts:
    __slots__ = ("arguments", "decorated", "function", "name", "risk")

    def __init__(self, instrumentor: PydanticAIInstrumentor, toolset: Any, name: Any, tool_args: Any, tool: Any):
        self.name = str(name)
        self.arguments = dict(tool_args) if isinstance(tool_args, Mapping) else {"args": tool_args}
        held = (getattr(toolset, "tools", None) or {}).get(getattr(tool, "original_name", None) or name)
        func = getattr(held, "function", None)
        marker = getattr(func, "__otel_replay__", None)
        self.decorated = isinstance(marker, dict) and marker.get("kind") == "tool"
        self.risk = instrumentor.risk_of(self.name, getattr(getattr(tool, "tool_def", None), "metadata", None))
        qualname = getattr(func, "__qualname__", "") or ""
        self.function = qualname_of(func) if callable(func) and "<" not in qualname else None


def _tool_wrapper(instrumentor: PydanticAIInstrumentor) -> Any:
    """Wrapper of ``FunctionToolset.call_tool(name, tool_args, ctx, tool)`` (a coroutine function)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled() or not in_run():
            return wrapped(*args, **kwargs)
        names = ("name", "tool_args", "ctx", "tool")
        given = {**dict(zip(names, args, strict=False)), **kwargs}
        parts = guards.safely(
            "read the tool call",
            _Parts,
            instrumentor,
            instance,
            given.get("name"),
            given.get("tool_args"),
            given.get("tool"),
        )
        if parts is None or parts.decorated:  # an @otel_replay.tool function records itself
            return wrapped(*args, **kwargs)

        async def call() -> Any:
            step = guards.begin(
                "tool",
                begin_tool_call,
                parts.name,
                parts.arguments,
                risk=parts.risk,
                function=parts.function,
                instrumentation=_NAME,
            )
            served = step.served if step is not None else None
            if served is None:
                try:
                    result = await wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(step, exc=exc)
                    raise
                end_call(step, result=result if plain_json(result) else guards.safely("encode the result", str, result))
                return result
            return answered(step)

        return call()

    return wrapper


# -------------------------------------------------------------------------------------- instrumentor


class PydanticAIInstrumentor(FrameworkInstrumentor):
    """Records Pydantic AI runs (``Agent.run`` / ``run_sync``) and function tool calls as otel-replay runs and
    tool steps, and answers the tools from the recording during a replay.

    Options (constructor or :meth:`instrument`): ``tool_risks`` maps tool names to ``read`` / ``write`` /
    ``high``; a tool not in the map takes the risk in its ``metadata`` (:data:`RISK_METADATA_KEY`), else the
    recorder's name rule. :meth:`instrument` also takes ``tracer_provider``. The OpenAI instrumentor is turned on
    with it, unless it is on already. Bad values raise ValueError. A singleton, like every ``BaseInstrumentor``.
    """

    guards = guards
    framework = "Pydantic AI"
    instruments = _instruments

    def risk_of(self, name: str, metadata: Any) -> str | None:
        """The declared risk of a tool: ``tool_risks`` by its name, else its metadata's ``otel_replay_risk``,
        else None (the recorder's name rule). Never raises."""
        try:
            if name in self._tool_risks:
                return self._tool_risks[name]
            marked = metadata.get(RISK_METADATA_KEY) if isinstance(metadata, Mapping) else None
            if marked is not None and marked not in _RISKS:
                _log.warning("otel-replay: tool %r is marked with unknown risk %r; treated as undeclared", name, marked)
                return None
            return str(marked) if marked is not None else None
        except Exception:  # noqa: BLE001
            guards.warn("read the tool's risk")
            return None

    def prepare(self) -> None:
        """A run that returns an ``AgentRunResult`` records its output (see :func:`_register_result`)."""
        guards.safely("register the run result", _register_result)

    def wrappers(self) -> list[tuple[str, str, Callable[..., Any]]]:
        """``AbstractAgent.run``, ``run_sync`` and ``iter`` (and ``Agent.iter``, which overrides it),
        ``FunctionToolset.call_tool``."""
        wrappers = {
            "AbstractAgent.run": _run_wrapper,
            "AbstractAgent.run_sync": _run_sync_wrapper,
            "AbstractAgent.iter": _iter_wrapper,
            "Agent.iter": _iter_wrapper,
            "FunctionToolset.call_tool": _tool_wrapper(self),
        }
        return [(module, target, wrappers[target]) for module, target in _TARGETS]
