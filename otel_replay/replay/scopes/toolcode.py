"""Where ``replay-tool`` finds the current code of a recorded tool that is not an ``@otel_replay.tool`` function: a
LangChain ``BaseTool`` looked for by its recorded name among the objects of a trusted module
(:func:`langchain_tool`), or an OpenAI Agents SDK ``@function_tool`` (``agents_function_tool``), each as a
callable that goes through the instrumented SDK and so through the replay's firewall.

It must never import a module the trust rule refuses (the rule decides before anything is imported), construct
an object the recording names, or call a tool itself.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, Final

from ... import semconv
from ...errors import ReplayRefused
from ...instrumentation import sdk_installed
from ...runs import Run, Step
from ..entrypoint import entrypoint_module

_SEARCH_DEPTH: Final = 6
"""How deep :func:`langchain_tool` looks into the app's objects (module → graph → its nodes → a node → its
runnable, a ``ToolNode`` → its tools by name → the tool)."""
_CONTAINER_ATTRS: Final = ("tools_by_name", "tools", "nodes", "bound")
"""Attributes through which LangChain / LangGraph objects hold their tools (``ToolNode.tools_by_name``,
``AgentExecutor.tools``, a compiled graph's ``nodes``, a node's ``bound`` runnable)."""


def _trusted_module(name: str, *, given: bool) -> types.ModuleType:
    """Import module ``name`` for a tool lookup, under the same trust rule as an entrypoint (refused before
    anything is imported)."""
    from ..safety.trust import entrypoint_refusal

    refusal = entrypoint_refusal(f"{name}:tool", given=given)
    if refusal is not None:
        raise ReplayRefused(
            refusal.replace(f"entrypoint {name + ':tool'!r}", f"module {name!r}").replace(
                "pass --app module:function", "pass --app MODULE"
            )
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the same refusal
        raise ReplayRefused(
            f"module {name!r} is not importable ({type(exc).__name__}: {exc}); run from the project "
            "folder or pass --app MODULE"
        ) from None


def _find_langchain_tool(obj: Any, name: str, base: type, depth: int, seen: set[int]) -> Any:
    """The ``BaseTool`` named ``name`` held by ``obj`` (a module's globals, a list or dict of tools, a graph,
    a ``ToolNode``, an ``AgentExecutor``), looked for breadth-first; None when there is none."""
    if isinstance(obj, base):
        return obj if getattr(obj, "name", None) == name else None
    if depth <= 0 or id(obj) in seen:
        return None
    seen.add(id(obj))
    if isinstance(obj, types.ModuleType):
        children = [v for k, v in vars(obj).items() if not k.startswith("__") and not isinstance(v, types.ModuleType)]
    elif isinstance(obj, Mapping):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        children = list(obj)
    else:
        children = []
        for attr in _CONTAINER_ATTRS:
            try:
                value = inspect.getattr_static(obj, attr, None)
                value = getattr(obj, attr, None) if value is not None else None
            except Exception:  # noqa: BLE001 - an object whose attribute fails is not a container of tools
                value = None
            if isinstance(value, (Mapping, list, tuple)) or (value is not None and attr == "bound"):
                children.append(value)
    direct = [c for c in children if isinstance(c, base)]
    for child in direct:
        if getattr(child, "name", None) == name:
            return child
    for child in children:
        if isinstance(child, (base, str, bytes, int, float, bool, type(None))):
            continue
        if not isinstance(child, (types.ModuleType, Mapping, list, tuple)) and not any(
            hasattr(type(child), a) or hasattr(child, a) for a in _CONTAINER_ATTRS
        ):
            continue
        found = _find_langchain_tool(child, name, base, depth - 1, seen)
        if found is not None:
            return found
    return None


def langchain_tool(
    recorded: Step, original: Run, *, app: str | None
) -> tuple[Callable[..., Any], dict[str, Any]] | None:
    """The current code's LangChain ``BaseTool`` behind tool step ``recorded`` (recorded by the LangChain
    instrumentor), as ``(call, meta)`` for :func:`replay_tool`; None for a step of another kind of tool.

    The tool is found by its recorded name among the objects of a module the trust rule allows
    (:mod:`otel_replay.replay.safety.trust`): ``app`` (``MODULE`` or ``MODULE:OBJECT``, given by the person replaying),
    else the module of the recorded tool function or of the recorded entrypoint. Nothing the recording names
    is constructed; the tool is called through ``BaseTool.run`` / ``arun``, which the LangChain instrumentor
    wraps, so the call goes through the replay's firewall. ``call(**arguments)`` returns what the tool
    returned when recorded: a ``ToolMessage`` when one was recorded (LangGraph's ``ToolNode`` asks for one)."""
    if recorded.attributes.get(semconv.STEP_INSTRUMENTATION) != "langchain":
        return None
    from langchain_core.tools import BaseTool

    from ..entrypoint import load_entrypoint

    script = (original.snapshots.get("input") or {}).get("script")
    roots: list[Any] = []
    if app:
        module_name, _, qualname = app.partition(":")
        root: Any = _trusted_module(module_name, given=True)
        for part in qualname.split(".") if qualname else ():
            root = getattr(root, part, None)
            if root is None:
                raise ReplayRefused(f"--app {app!r}: {module_name} has no {qualname}")
        roots.append(root)
    else:
        for spec in (recorded.attributes.get(semconv.TOOL_FUNCTION), original.entrypoint):
            if not spec or (spec.startswith("__main__:") and not script):
                continue
            found = load_entrypoint(spec, script=script)
            roots.append(sys.modules.get(getattr(found, "__module__", "") or "") or found)
        if not roots:
            raise ReplayRefused(
                f"tool {recorded.name!r} was recorded by the LangChain instrumentation in a run with "
                "no entrypoint: pass --app MODULE naming the module that defines the tool or the "
                "agent using it"
            )
    tool = next(
        (
            t
            for t in (_find_langchain_tool(r, recorded.name, BaseTool, _SEARCH_DEPTH, set()) for r in roots)
            if t is not None
        ),
        None,
    )
    if tool is None:
        where = app or ", ".join(getattr(r, "__name__", type(r).__name__) for r in roots)
        raise ReplayRefused(
            f"no LangChain tool named {recorded.name!r} was found in {where}; pass --app "
            "MODULE:OBJECT naming the tool, the tool list or the agent that holds it"
        )
    result = (recorded.snapshots.get("tool") or {}).get("result")
    call_id = None
    if isinstance(result, dict) and result.get("type") == "tool" and isinstance(result.get("data"), dict):
        call_id = result["data"].get("tool_call_id")  # the recorded call returned a ToolMessage: ask for one
    extra = {"tool_call_id": call_id} if isinstance(call_id, str) else {}
    if getattr(tool, "func", None) is None and getattr(tool, "coroutine", None) is not None:

        async def call_async(**arguments: Any) -> Any:
            return await tool.arun(arguments, **extra)

        return call_async, {"kind": "tool", "schema_version": None}

    def call(**arguments: Any) -> Any:
        return tool.run(arguments, **extra)

    return call, {"kind": "tool", "schema_version": None}


def agents_function_tool(function: str, *, script: str | None) -> Any | None:
    """The recorded tool function ``function`` (``module:name``) as a callable of its keyword arguments when the
    current code defines it as an OpenAI Agents SDK ``@function_tool``; None when it is something else (the
    caller then loads it as an ``@otel_replay.tool`` function). The trust rule decides before anything is
    imported; only a tool object found under that name, whose function is defined in that module, is used:
    nothing named by the recording is constructed. The call goes through the SDK's tool-invocation boundary,
    instrumented for the call, so the replay's firewall answers or refuses it."""
    from ..safety.trust import entrypoint_refusal

    module_name, _, name = function.partition(":")
    if not module_name or not name or "." in name or "<locals>" in name:
        return None
    if "agents" not in sys.modules and not sdk_installed("openai_agents"):
        return None
    refusal = entrypoint_refusal(function, given=False, script=script)
    if refusal is not None:
        raise ReplayRefused(refusal)
    from ...instrumentation.openai_agents import function_tool_of, invoke_function_tool

    module = entrypoint_module(function, module_name, script)
    tool = function_tool_of(getattr(module, name, None), module.__name__)
    if tool is None:
        return None

    async def call(**arguments: Any) -> Any:
        from ... import instrumentation

        added = not instrumentation.instrumented("openai_agents") and bool(instrumentation.instrument("openai_agents"))
        try:
            return await invoke_function_tool(tool, arguments)
        finally:
            if added:
                instrumentation.uninstrument("openai_agents")

    call.__otel_replay__ = {"kind": "tool", "name": tool.name, "schema_version": None}  # type: ignore[attr-defined]
    return call
