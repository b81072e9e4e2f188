"""LangChain core / LangGraph instrumentation: chat models, tools and retrievers as otel-replay steps.

Why it exists: agents built on LangChain or LangGraph should be recorded step by step and replayed in mock,
deterministic, live or partial mode without touching their code. This module wraps LangChain core at the
boundaries where the whole call is visible as LangChain's own objects, and answers each call from the
recording at that same boundary during a replay:

* chat models: ``BaseChatModel._generate_with_cache`` / ``_agenerate_with_cache`` (what ``invoke``,
  ``ainvoke``, ``batch`` and ``generate`` reach, inside LangChain's callbacks, after its normalisation of the
  messages: the request messages, the invocation parameters incl. bound tools, and the ``ChatResult`` with
  the ``AIMessage``, its ``tool_calls`` and ``usage_metadata``), plus ``BaseChatModel.stream`` / ``astream``
  when the model really streams (otherwise they fall back to ``invoke`` and are recorded there);
* tools: ``BaseTool.run`` / ``arun`` (name, input, output, and the ``ToolMessage`` LangGraph's ``ToolNode``
  expects);
* retrievers: ``BaseRetriever.invoke`` / ``ainvoke`` (query, Documents with ids, metadata sources, scores);
* the top-level invocation outside a run: LangGraph ``Pregel.invoke`` / ``ainvoke`` / ``stream`` /
  ``astream``, LCEL ``RunnableSequence.invoke`` / ``ainvoke`` and legacy ``Chain.invoke`` / ``ainvoke``
  (``langchain_classic``: ``AgentExecutor``, whose whole loop is then one run) begin an implicit run, so
  nothing is lost when the application has no ``@orp.agent``; a model, tool or retriever called alone outside any
  run is an implicit run of one step.

What it must never do: raise into the host program from its own bookkeeping (every failure is logged and the
real call goes ahead), swallow or wrap the host's exceptions (they are recorded and re-raised unchanged),
call the real model, tool or retriever when the replay answered the call, import LangChain before
:meth:`LangChainInstrumentor.instrument` is called, or import LangGraph at all (its ``Pregel`` is patched right
after the application imports it, see :mod:`otel_replay.instrumentation._lazy`).
:class:`~otel_replay.recording.ReplayInterrupt` (a ``BaseException``) always propagates: LangChain and LangGraph
only catch ``Exception`` on these paths.

The instrumentor, its patch targets and the tool wrappers (with what ``replay_tool`` needs of a LangChain tool:
its function's importable name) are here; the rest is in ``_langchain_models`` (the chat model and retriever
wrappers), ``_langchain_runs`` (implicit runs, how a wrapped step ends, the bookkeeping guards) and
``_langchain_codecs`` (LangChain's objects as plain data and back).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Collection, Mapping
from types import ModuleType
from typing import Any, Final

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap

from ..recording import begin_tool_call, end_call
from ..snapshots import qualname_of
from . import _lazy
from ._guarded import RISKS as _RISKS
from ._guarded import check_risks as _check_risks
from ._guarded import enabled as _enabled
from ._langchain_codecs import arg, tool_arguments, tool_output_from, tool_output_plain, with_replayed_message_ids
from ._langchain_models import (
    agenerate_wrapper,
    astream_wrapper,
    generate_wrapper,
    retriever_wrappers,
    stream_wrapper,
)
from ._langchain_runs import (
    NAME,
    async_in_run,
    entry_wrappers,
    guards,
    langchain_begin,
    langchain_safely,
    langchain_warn,
    log,
    name_of,
    ran,
    served_answer,
    sync_in_run,
)

_instruments: Final = ("langchain-core >= 0.3",)
"""Packages this instrumentor needs (``opentelemetry-instrument`` checks them); LangGraph is optional."""
RISK_METADATA_KEY: Final = "otel_replay_risk"
"""Key in a tool's ``metadata`` (or prefix ``otel_replay_risk:`` of one of its ``tags``) that marks its risk."""
HANDOFF_METADATA_KEY: Final = "__handoff_destination"
"""Key in the ``metadata`` of the handoff tools ``langgraph-supervisor`` and ``langgraph-swarm`` generate
(``transfer_to_<agent>``): routing inside the graph, risk ``read`` unless declared otherwise."""
_CHAT: Final = "langchain_core.language_models.chat_models"
_TOOLS: Final = "langchain_core.tools.base"
_RETRIEVERS: Final = "langchain_core.retrievers"
_RUNNABLES: Final = "langchain_core.runnables.base"
_LANGGRAPH: Final = "langgraph.pregel"
OPTIONAL_ENTRY_POINTS: Final[tuple[tuple[str, str, str], ...]] = (
    (_LANGGRAPH, "Pregel", "invoke"),
    (_LANGGRAPH, "Pregel", "ainvoke"),
    (_LANGGRAPH, "Pregel", "stream"),
    (_LANGGRAPH, "Pregel", "astream"),
    ("langchain_classic.chains.base", "Chain", "invoke"),
    ("langchain_classic.chains.base", "Chain", "ainvoke"),
    ("langchain.chains.base", "Chain", "invoke"),
    ("langchain.chains.base", "Chain", "ainvoke"),
)
"""(module, class, method) of the top-level invocations of packages beside LangChain core that begin an
implicit run when called outside one: LangGraph graphs, and legacy chains (``AgentExecutor`` is a ``Chain``:
its whole loop is one run). Patched only when the module's package is installed; the method names are those
of :func:`entry_wrappers`."""


def _installed(module: str) -> bool:
    """Whether the package of ``module`` is imported or installed (found without importing it)."""
    top = module.partition(".")[0]
    if top in sys.modules:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _tool_function(tool: Any) -> str | None:
    """``module:qualname`` of the tool's function when that name imports to the function itself (so
    ``replay_tool`` can call it); None for a ``@tool`` whose module attribute is the tool object."""
    func = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if not callable(func):
        return None
    module = sys.modules.get(getattr(func, "__module__", "") or "")
    obj: Any = module
    for part in (getattr(func, "__qualname__", "") or "").split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    return qualname_of(func) if obj is func else None


def _mcp_recorded(tool: Any) -> bool:
    """Whether ``tool`` is one ``langchain-mcp-adapters`` made of an MCP server's tool, and the MCP instrumentor
    records its calls itself (a step named after the tool, with the server's annotations as its risk)."""
    coroutine = getattr(tool, "coroutine", None)
    if not str(getattr(coroutine, "__module__", "") or "").startswith("langchain_mcp_adapters."):
        return False
    from . import instrumented

    return bool(instrumented("mcp"))


def _handoff_to(tool: Any) -> str | None:
    """The agent a multi-agent framework's generated handoff tool hands to (:data:`HANDOFF_METADATA_KEY`), else
    None (a tool of the user's)."""
    metadata = getattr(tool, "metadata", None)
    to = metadata.get(HANDOFF_METADATA_KEY) if isinstance(metadata, Mapping) else None
    return str(to) if to is not None else None


class _ToolParts:
    __slots__ = ("arguments", "function", "handoff_to", "name", "risk", "tool_call_id")

    def __init__(
        self, instrumentor: LangChainInstrumentor, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.name = str(getattr(tool, "name", None) or type(tool).__name__)
        self.arguments = tool_arguments(tool, arg(args, kwargs, 0, "tool_input"))
        self.risk = instrumentor.risk_of(tool)
        self.handoff_to = _handoff_to(tool)
        self.function = _tool_function(tool)
        self.tool_call_id = kwargs.get("tool_call_id")

    def begin(self) -> Any:
        return langchain_begin(
            "tool",
            begin_tool_call,
            self.name,
            self.arguments,
            risk=self.risk,
            function=self.function,
            instrumentation=NAME,
            handoff_to=self.handoff_to,
        )


def _served_tool_output(call: Any, parts: Any, served: Any, tool_input: Any) -> Any:
    """The output LangChain expects for a tool call answered from the recording (or its recorded error), the
    graph's messages in it carrying the replay's message ids (a handoff's ``Command``)."""
    return served_answer(
        call,
        "tool",
        parts.name,
        served,
        lambda v: tool_output_from(with_replayed_message_ids(v, tool_input), parts.tool_call_id),
    )


def _tool_wrappers(instrumentor: LangChainInstrumentor) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Wrappers of ``BaseTool.run`` and ``BaseTool.arun``."""

    def run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)

        def body() -> Any:
            if langchain_safely("read the tool's origin", _mcp_recorded, instance):
                return wrapped(*args, **kwargs)  # the MCP client's step, not a second one here
            parts = langchain_safely("read the tool call", _ToolParts, instrumentor, instance, args, kwargs)
            call = parts.begin() if parts is not None else None
            served = call.served if call is not None else None
            if served is None:
                try:
                    output = wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return ran(call, output, "tool output", tool_output_plain)
            return _served_tool_output(call, parts, served, arg(args, kwargs, 0, "tool_input"))

        return sync_in_run(
            name_of(instance, "tool"),
            lambda: {"input": arg(args, kwargs, 0, "tool_input")},
            kwargs.get("config"),
            body,
        )

    def arun(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not _enabled():
            return wrapped(*args, **kwargs)

        async def body() -> Any:
            if langchain_safely("read the tool's origin", _mcp_recorded, instance):
                return await wrapped(*args, **kwargs)  # the MCP client's step, not a second one here
            parts = langchain_safely("read the tool call", _ToolParts, instrumentor, instance, args, kwargs)
            call = parts.begin() if parts is not None else None
            served = call.served if call is not None else None
            if served is None:
                try:
                    output = await wrapped(*args, **kwargs)
                except BaseException as exc:
                    end_call(call, exc=exc)
                    raise
                return ran(call, output, "tool output", tool_output_plain)
            return _served_tool_output(call, parts, served, arg(args, kwargs, 0, "tool_input"))

        return async_in_run(
            name_of(instance, "tool"),
            lambda: {"input": arg(args, kwargs, 0, "tool_input")},
            kwargs.get("config"),
            body,
        )

    return run, arun


def _register_models() -> None:
    """Register LangChain's messages and Document, and LangGraph's ``Command`` and ``Send`` when LangGraph is
    installed, so a recorded value holding one (a tool result, a handoff, a graph's input) is rebuilt in a replay
    (see :mod:`otel_replay.revival`); never raises."""
    from ..revival import register_types

    try:
        from langchain_core.documents import Document
        from langchain_core.messages import (
            AIMessage,
            AIMessageChunk,
            ChatMessage,
            FunctionMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
        )

        register_types(
            (
                AIMessage,
                AIMessageChunk,
                ChatMessage,
                FunctionMessage,
                HumanMessage,
                SystemMessage,
                ToolMessage,
                Document,
            )
        )
    except Exception:  # noqa: BLE001 - a LangChain version without one of them: replays get plain dicts
        log.warning("otel-replay: could not register the LangChain message models", exc_info=True)
    try:  # what a LangGraph tool returns to steer the graph (a handoff): rebuilt, not handed back as a dict
        from langgraph.types import Command, Send
    except ImportError:  # LangChain without LangGraph
        return
    register_types((Command, Send))


class LangChainInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Records LangChain chat models, tools and retrievers (and LangGraph agents built from them) as
    otel-replay steps, and answers them from the recording during a replay.

    ``tool_risks`` maps tool names to ``read`` / ``write`` / ``high``; a tool not in the map takes the risk
    marked on it (``metadata={"otel_replay_risk": "high"}`` or a tag ``otel_replay_risk:high``), else the
    recorder's name heuristic (``send_email``, ``delete_user``, … are ``high``), else ``read``. Passing
    ``tool_risks`` to :meth:`instrument` replaces the map. ``tracer_provider`` sends the spans it records to that
    provider instead of the current runtime's (see ``docs/instrumentation.md``). Bad values raise ValueError.

    Like every ``BaseInstrumentor`` it is a singleton: constructing it again keeps the current map unless a
    new one is given.
    """

    def __init__(self, *, tool_risks: Mapping[str, str] | None = None) -> None:
        if tool_risks is not None or not hasattr(self, "_tool_risks"):
            self._tool_risks: dict[str, str] = _check_risks(tool_risks)

    def instrumentation_dependencies(self) -> Collection[str]:
        """The packages this instrumentor needs: ``langchain-core`` (LangGraph is optional)."""
        return _instruments

    def check_options(self, **options: Any) -> None:
        """Raise ValueError for options :meth:`instrument` would refuse (``tool_risks``), without instrumenting:
        ``orp.instrument()`` checks them before it arms the instrumentor for a LangChain not imported yet."""
        if "tool_risks" in options:
            _check_risks(options["tool_risks"])

    def risk_of(self, tool: Any) -> str | None:
        """The declared risk of a LangChain tool: from ``tool_risks``, else its metadata or tags; None when
        undeclared (the recorder then applies its name heuristic, except to a handoff tool a multi-agent framework
        generated, :data:`HANDOFF_METADATA_KEY`, which is recorded as a handoff step without a risk). Never
        raises."""
        try:
            name = str(getattr(tool, "name", "") or "")
            if name in self._tool_risks:
                return self._tool_risks[name]
            metadata = getattr(tool, "metadata", None) or {}
            marked = metadata.get(RISK_METADATA_KEY) if isinstance(metadata, Mapping) else None
            if marked is None:
                prefix = f"{RISK_METADATA_KEY}:"
                marked = next(
                    (
                        t[len(prefix) :]
                        for t in getattr(tool, "tags", None) or []
                        if isinstance(t, str) and t.startswith(prefix)
                    ),
                    None,
                )
            if marked is None:
                return None
            if marked not in _RISKS:
                log.warning("otel-replay: tool %r is marked with unknown risk %r; treated as undeclared", name, marked)
                return None
            return str(marked)
        except Exception:  # noqa: BLE001
            langchain_warn("read the tool's risk")
            return None

    def _targets(self) -> list[tuple[str, str, str, Callable[..., Any]]]:
        """(module, class, method, wrapper) of every patch of LangChain core."""
        tool_run, tool_arun = _tool_wrappers(self)
        retriever_invoke, retriever_ainvoke = retriever_wrappers()
        invoke, ainvoke, _, _ = entry_wrappers()
        return [
            (_CHAT, "BaseChatModel", "_generate_with_cache", generate_wrapper),
            (_CHAT, "BaseChatModel", "_agenerate_with_cache", agenerate_wrapper),
            (_CHAT, "BaseChatModel", "stream", stream_wrapper),
            (_CHAT, "BaseChatModel", "astream", astream_wrapper),
            (_TOOLS, "BaseTool", "run", tool_run),
            (_TOOLS, "BaseTool", "arun", tool_arun),
            (_RETRIEVERS, "BaseRetriever", "invoke", retriever_invoke),
            (_RETRIEVERS, "BaseRetriever", "ainvoke", retriever_ainvoke),
            (_RUNNABLES, "RunnableSequence", "invoke", invoke),
            (_RUNNABLES, "RunnableSequence", "ainvoke", ainvoke),
        ]

    @staticmethod
    def _optional_targets(module: str) -> list[tuple[str, str, str, Callable[..., Any]]]:
        """(module, class, method, wrapper) of the :data:`OPTIONAL_ENTRY_POINTS` of ``module``."""
        # a LangGraph graph invoked inside a run is a subgraph: an agent step of the run
        entry = dict(zip(("invoke", "ainvoke", "stream", "astream"), entry_wrappers(module == _LANGGRAPH), strict=True))
        return [(mod, cls, method, entry[method]) for mod, cls, method in OPTIONAL_ENTRY_POINTS if mod == module]

    def _instrument(self, **kwargs: Any) -> None:
        if "tool_risks" in kwargs:
            self._tool_risks = _check_risks(kwargs["tool_risks"])
        guards.bind(kwargs.get("tracer_provider"))
        self._patched: list[tuple[str, str, str]] = []
        self._patch(self._targets())
        _register_models()
        # LangGraph and legacy chains are patched after their own import (at once when imported already),
        # never imported here
        modules = [module for module in dict.fromkeys(m for m, _, _ in OPTIONAL_ENTRY_POINTS) if _installed(module)]
        self._hooks = [_lazy.when_imported(module, self._patch_optional(module)) for module in modules]

    def _patch_optional(self, module: str) -> Callable[[ModuleType], None]:
        """The import hook that patches the optional entry points of ``module``."""

        def patch(_module: ModuleType) -> None:
            self._patch(self._optional_targets(module))

        return patch

    def _patch(self, targets: list[tuple[str, str, str, Callable[..., Any]]]) -> None:
        for module, cls, method, wrapper in targets:
            try:
                wrapt.wrap_function_wrapper(module, f"{cls}.{method}", wrapper)
            except ImportError:  # an installed package without this module (``langchain`` 1.x has no chains)
                log.debug("otel-replay: %s is not importable; %s.%s not instrumented", module, cls, method)
                continue
            except Exception:  # noqa: BLE001 - a LangChain version without this method: skip it
                log.warning("otel-replay: cannot instrument %s.%s.%s", module, cls, method, exc_info=True)
                continue
            self._patched.append((module, cls, method))

    def _uninstrument(self, **kwargs: Any) -> None:
        for hook in getattr(self, "_hooks", []):
            _lazy.cancel(hook)
        for module, cls, method in reversed(getattr(self, "_patched", [])):
            try:
                unwrap(getattr(sys.modules[module], cls), method)
            except Exception:  # noqa: BLE001
                log.warning("otel-replay: cannot uninstrument %s.%s.%s", module, cls, method, exc_info=True)
        self._patched = []
        guards.bind(None)
