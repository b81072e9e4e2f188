"""The two narrower and wider replay scopes beside a whole run: one tool call, and a whole conversation.

:func:`replay_tool` re-runs one recorded tool call with its recorded (or given) arguments, to troubleshoot
parameters, permissions, a changed schema or a failing service; :func:`replay_session` replays the runs of
one conversation (same session id) in their original order and reports a result per turn. Both go through
the same session, firewall and audit as :func:`~otel_replay.replay.engine.replay`: every replay is a new
trace linked to the original, a ``write``/``high`` tool executes only with an approval given now.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from opentelemetry.sdk.trace import ReadableSpan

from .. import semconv
from ..errors import ReplayRefused
from ..exporting import setup
from ..instrumentation import _sdk_installed
from ..recording import ReplayInterrupt, agent, replaying
from ..records import parse_trace_id
from ..runs import Run, Step
from ..semconv import ReplayMode
from ..snapshots import canonical_json, to_jsonable
from . import journal as audit_journal
from .approvals import Approvals
from .engine import (
    ReplayResult,
    _call,
    _entrypoint_module,
    _ingest,
    _instrumented,
    _load_replay,
    _open_store,
    _scrubbed,
    load_entrypoint,
    replay,
)
from .hashing import MISSING, same_content, stored_text
from .session import ReplaySession, os_user, revive


@dataclass(frozen=True, kw_only=True)
class ToolReplayResult:
    """One tool call replayed and compared with the recorded call."""

    original_trace_id: str
    step: int
    tool: str
    mode: str
    args_source: str
    """``recorded`` or ``given``."""
    outcome: str
    """``matched`` (same result as recorded), ``diverged`` or ``refused``."""
    recorded_result: Any
    recorded_error: Any
    result: Any
    error: dict[str, str] | None
    schema_version: dict[str, str | None]
    """``recorded`` and ``current`` tool schema versions (they differ when the tool's schema changed)."""
    replay_trace_id: str | None
    approvals: tuple[str, ...]
    actor: str
    reason: str | None
    refusal: str | None = None

    @property
    def diverged(self) -> bool:
        """True when the result differs from the recorded one."""
        return self.outcome == "diverged"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``otel-replay replay-tool --json``)."""
        return {
            "original_trace_id": self.original_trace_id,
            "step": self.step,
            "tool": self.tool,
            "mode": self.mode,
            "args_source": self.args_source,
            "outcome": self.outcome,
            "diverged": self.diverged,
            "recorded_result": self.recorded_result,
            "recorded_error": self.recorded_error,
            "result": self.result,
            "error": self.error,
            "schema_version": self.schema_version,
            "replay_trace_id": self.replay_trace_id,
            "approvals": list(self.approvals),
            "actor": self.actor,
            "reason": self.reason,
            "refusal": self.refusal,
        }


_SEARCH_DEPTH: Final = 6
"""How deep :func:`langchain_tool` looks into the app's objects (module → graph → its nodes → a node → its
runnable, a ``ToolNode`` → its tools by name → the tool)."""
_CONTAINER_ATTRS: Final = ("tools_by_name", "tools", "nodes", "bound")
"""Attributes through which LangChain / LangGraph objects hold their tools (``ToolNode.tools_by_name``,
``AgentExecutor.tools``, a compiled graph's ``nodes``, a node's ``bound`` runnable)."""


def _trusted_module(name: str, *, given: bool) -> types.ModuleType:
    """Import module ``name`` for a tool lookup, under the same trust rule as an entrypoint (refused before
    anything is imported)."""
    from .trust import entrypoint_refusal

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
    (:mod:`otel_replay.replay.trust`): ``app`` (``MODULE`` or ``MODULE:OBJECT``, given by the person replaying),
    else the module of the recorded tool function or of the recorded entrypoint. Nothing the recording names
    is constructed; the tool is called through ``BaseTool.run`` / ``arun``, which the LangChain instrumentor
    wraps, so the call goes through the replay's firewall. ``call(**arguments)`` returns what the tool
    returned when recorded: a ``ToolMessage`` when one was recorded (LangGraph's ``ToolNode`` asks for one)."""
    if recorded.attributes.get(semconv.STEP_INSTRUMENTATION) != "langchain":
        return None
    from langchain_core.tools import BaseTool

    from .engine import load_entrypoint

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


def replay_tool(
    trace_id: str,
    step: int,
    *,
    mode: str | ReplayMode = "mock",
    args: Mapping[str, Any] | None = None,
    approve: bool = False,
    actor: str | None = None,
    reason: str | None = None,
    store: Any = None,
    app: str | None = None,
) -> ToolReplayResult:
    """Re-run the tool call recorded as step ``step`` of ``trace_id`` (``mock``: answer from the recording;
    ``live``: call the tool for real, ``write``/``high`` only with ``approve=True``), with the recorded
    arguments or ``args``, and compare the result with the recorded one.

    The tool is the ``@otel_replay.tool`` function the step recorded, or a LangChain tool found by
    :func:`langchain_tool` (``app``: ``MODULE`` or ``MODULE:OBJECT`` to look in, for a run that recorded no
    entrypoint)."""
    replay_mode = ReplayMode(mode) if str(mode) in ("mock", "live") else None
    if replay_mode is None:
        raise ReplayRefused("replay-tool takes --mode mock or --mode live")
    if replay_mode is ReplayMode.LIVE and not (reason and reason.strip()):
        raise ReplayRefused("a live tool replay calls the real tool: give a reason (--reason TEXT)")
    tid = parse_trace_id(trace_id)
    actor, reason = _scrubbed(actor or os_user()), _scrubbed(reason)
    opened, close_store = _open_store(store)
    instrumenting = contextlib.ExitStack()
    try:
        original = opened.load_run(tid)
        try:
            recorded = original.step(step)
        except KeyError:
            raise ReplayRefused(f"run {tid} has no step {step}; see `otel-replay show {tid}`") from None
        if recorded.kind != "tool":
            raise ReplayRefused(f"step {step} of run {tid} is a {recorded.kind} step, not a tool call")
        function = recorded.attributes.get(semconv.TOOL_FUNCTION)
        # A tool recorded through an SDK's instrumentation is called through its wrapper: instrument that SDK.
        # _instrumented reads only the run's steps and trace id
        one_step = cast("Run", types.SimpleNamespace(steps=[recorded], trace_id=tid))
        instrumenting.enter_context(_instrumented(one_step))
        framework = langchain_tool(recorded, original, app=app)
        if not function and framework is None:
            raise ReplayRefused(
                f"step {step} does not record which function the tool is (recorded before "
                "otel-replay wrote otel_replay.tool.function)"
            )
        snapshot = recorded.snapshots.get("tool") or {}
        script = (original.snapshots.get("input") or {}).get("script")
        tool_func, current = framework or (
            _agents_function_tool(function, script=script) or load_entrypoint(function, script=script),
            None,
        )
        if args is not None:
            call_args, source = dict(args), "given"
        else:
            call_args, source = revive(snapshot.get("arguments") or {}), "recorded"
            if replay_mode is ReplayMode.LIVE and "$redacted" in canonical_json(snapshot.get("arguments")):
                raise ReplayRefused(
                    f"the recorded arguments of step {step} hold redacted values a live call "
                    "cannot restore: pass them with --args JSON"
                )
        current = current or getattr(tool_func, "__otel_replay__", None)
        if not current or current.get("kind") != "tool":
            raise ReplayRefused(
                f"{function} is not an @otel_replay.tool function in the current code (it may have "
                "been wrapped under another name): it cannot be replayed through the firewall"
            )
        approvals = (recorded.name,) if approve else ()
        # from_step records which step was replayed; the session knows only that one recorded call.
        session = ReplaySession(
            original=original,
            mode=replay_mode,
            from_step=step,
            approvals=approvals,
            mocks=None,
            actor=actor or "",
            reason=reason,
        )
        session.recorded = [recorded]
        spans: list[ReadableSpan] = []

        def keep(span: ReadableSpan) -> None:
            if session.trace_id is not None and f"{span.context.trace_id:032x}" == session.trace_id:
                spans.append(span)

        agent_name: str = original.agent
        if inspect.iscoroutinefunction(tool_func):

            @agent(agent_name)
            async def tool_replay() -> Any:
                return await tool_func(**call_args)
        else:

            @agent(agent_name)
            def tool_replay() -> Any:
                return tool_func(**call_args)

        outcome_error: dict[str, str] | None = None
        result: Any = None
        journal = audit_journal.started(session) if audit_journal.needs_record(session) else None
        with replaying(session), setup.tap(keep):
            try:
                result = _call(tool_replay, (), {})
            except ReplayInterrupt:
                pass
            except Exception as exc:  # noqa: BLE001 - the tool's failure is the result
                outcome_error = {"type": type(exc).__name__, "message": str(exc)}
            setup.flush()
        audit_journal.finished(journal, session)
        _ingest(opened)
        replayed = _load_replay(opened, session.trace_id, spans)
        tool_steps = [s for s in replayed.steps if s.kind == "tool"] if replayed is not None else []
        new_snapshot = tool_steps[0].snapshots.get("tool") or {} if tool_steps else {}
        refusal = session.refusal
        if refusal is not None:
            outcome = "refused"
        else:
            same_error = (outcome_error or {}).get("type") == ((snapshot.get("error") or {}).get("type"))
            recorded_text = stored_text(snapshot["result"]) if "result" in snapshot else MISSING
            same_result = same_content(
                snapshot.get("result_hash"), new_snapshot.get("result_hash"), text_a=recorded_text
            ) or (
                same_content(
                    snapshot.get("result_hash"), None, text_a=recorded_text, text_b=canonical_json(to_jsonable(result))
                )
            )
            outcome = "matched" if same_error and (outcome_error is not None or same_result) else "diverged"
        return ToolReplayResult(
            original_trace_id=tid,
            step=step,
            tool=recorded.name,
            mode=replay_mode.value,
            args_source=source,
            outcome=outcome,
            recorded_result=snapshot.get("result"),
            recorded_error=snapshot.get("error"),
            result=new_snapshot.get("result") if new_snapshot else None,
            error=outcome_error,
            schema_version={
                "recorded": recorded.attributes.get(semconv.TOOL_SCHEMA_VERSION),
                "current": current.get("schema_version"),
            },
            replay_trace_id=session.trace_id,
            approvals=approvals,
            actor=actor or "",
            reason=reason,
            refusal=refusal,
        )
    finally:
        instrumenting.close()
        if close_store:
            opened.close()


def _agents_function_tool(function: str, *, script: str | None) -> Any | None:
    """The recorded tool function ``function`` (``module:name``) as a callable of its keyword arguments when the
    current code defines it as an OpenAI Agents SDK ``@function_tool``; None when it is something else (the
    caller then loads it as an ``@otel_replay.tool`` function). The trust rule decides before anything is
    imported; only a tool object found under that name, whose function is defined in that module, is used:
    nothing named by the recording is constructed. The call goes through the SDK's tool-invocation boundary,
    instrumented for the call, so the replay's firewall answers or refuses it."""
    from .trust import entrypoint_refusal

    module_name, _, name = function.partition(":")
    if not module_name or not name or "." in name or "<locals>" in name:
        return None
    if "agents" not in sys.modules and not _sdk_installed("openai_agents"):
        return None
    refusal = entrypoint_refusal(function, given=False, script=script)
    if refusal is not None:
        raise ReplayRefused(refusal)
    from ..instrumentation.openai_agents import function_tool_of, invoke_function_tool

    module = _entrypoint_module(function, module_name, script)
    tool = function_tool_of(getattr(module, name, None), module.__name__)
    if tool is None:
        return None

    async def call(**arguments: Any) -> Any:
        from .. import instrumentation

        added = not instrumentation.instrumented("openai_agents") and bool(instrumentation.instrument("openai_agents"))
        try:
            return await invoke_function_tool(tool, arguments)
        finally:
            if added:
                instrumentation.uninstrument("openai_agents")

    call.__otel_replay__ = {"kind": "tool", "name": tool.name, "schema_version": None}  # type: ignore[attr-defined]
    return call


@dataclass(frozen=True, kw_only=True)
class SessionReplayResult:
    """The runs of one conversation replayed in order, one result per turn."""

    session_id: str
    mode: str
    turns: tuple[ReplayResult, ...] = field(default=())

    @property
    def first_diverged_turn(self) -> int | None:
        """Index (from 0) of the first turn that did not match, or None."""
        return next((i for i, t in enumerate(self.turns) if t.outcome != "matched"), None)

    @property
    def outcome(self) -> str:
        """``refused`` if a turn was refused, else ``diverged`` if one diverged, else ``matched``."""
        outcomes = {t.outcome for t in self.turns}
        return "refused" if "refused" in outcomes else "diverged" if "diverged" in outcomes else "matched"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``otel-replay replay-session --json``)."""
        return {
            "session_id": self.session_id,
            "mode": self.mode,
            "outcome": self.outcome,
            "diverged": self.outcome == "diverged",
            "first_diverged_turn": self.first_diverged_turn,
            "turns": [{"turn": i, **t.to_dict()} for i, t in enumerate(self.turns)],
        }


def replay_session(
    session_id: str,
    *,
    mode: str | ReplayMode,
    approvals: Sequence[str] = (),
    actor: str | None = None,
    reason: str | None = None,
    store: Any = None,
    entrypoint: str | None = None,
    mocks: Mapping[str, Any] | None = None,
) -> SessionReplayResult:
    """Replay every original run of conversation ``session_id`` in the order they ran. Each turn replays
    against the state the earlier replayed turns left behind (the agent's own memory); a refused turn ends
    the conversation replay."""
    if not session_id or not str(session_id).strip():
        raise ReplayRefused("a session id is required")
    budget = Approvals.of(approvals)  # one budget for the whole conversation: NAME is one call in all turns
    opened, close_store = _open_store(store)
    try:
        roots = opened.run_rows(session=str(session_id), kind=semconv.RunKind.ORIGINAL.value, limit=10_000)
        if not roots:
            raise ReplayRefused(f"no runs with session id {session_id!r} in the store; see `otel-replay runs`")
        turns: list[ReplayResult] = []
        for root in sorted(roots, key=lambda r: r.timestamp_ns):
            result = replay(
                root.trace_id,
                mode=mode,
                approvals=budget,
                actor=actor,
                reason=reason,
                store=opened,
                entrypoint=entrypoint,
                mocks=mocks,
            )
            turns.append(result)
            if result.outcome == "refused":
                break
        return SessionReplayResult(session_id=str(session_id), mode=str(ReplayMode(mode).value), turns=tuple(turns))
    finally:
        if close_store:
            opened.close()
