"""The narrowest replay scope: :func:`replay_tool` re-runs one recorded tool call with its recorded (or given)
arguments, to troubleshoot parameters, permissions, a changed schema or a failing service. It goes through the
same session, firewall and audit as :func:`~otel_replay.replay.engine.replay`: every replay is a new trace linked
to the original, a ``write``/``high`` tool executes only with an approval given now. The widest scope, a whole
conversation, is :mod:`otel_replay.replay.scopes.conversation`.
"""

from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from opentelemetry.sdk.trace import ReadableSpan

from ... import semconv
from ...errors import ReplayRefused
from ...exporting import setup
from ...recording import ReplayInterrupt, agent, replaying
from ...records import parse_trace_id
from ...runs import Run
from ...semconv import ReplayMode
from ...snapshots import canonical_json, to_jsonable
from ..engine import call_entrypoint, scrubbed_text
from ..entrypoint import instrumented, load_entrypoint
from ..matching.hashing import MISSING, same_content, stored_text
from ..safety import guard, sandbox
from ..safety import journal as audit_journal
from ..session import ReplaySession, os_user, revive
from ..storing import ingest, load_replay
from .toolcode import agents_function_tool, langchain_tool


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
    sandbox: str = ""
    """What stopped unrecorded side effects (``landlock ABI n``, ``audit hooks only``, ``none`` for live), as
    for :attr:`ReplayResult.sandbox`."""

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
            "sandbox": self.sandbox,
        }


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
    actor, reason = scrubbed_text(actor or os_user()), scrubbed_text(reason)
    # A mock tool replay imports the tool's module and calls it confined, as an offline replay does.
    enforcement = sandbox.plan(replay_mode, allow_side_effects=False)
    shown = {"text": enforcement.text}

    def unconfined(weaker: sandbox.Enforcement) -> None:
        shown["text"] = weaker.text

    # the tool's import and its call on one confined thread (see sandbox.Confinement)
    confinement = sandbox.Confinement(enforcement, on_unconfined=unconfined)
    confined = confinement.call

    from ...storage.store import open_given  # the store (and the rows encoder) load only when a store is used

    opened, close_store = open_given(store)
    instrumenting = contextlib.ExitStack()
    instrumenting.enter_context(confinement)
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
        # instrumented reads only the run's steps and trace id
        one_step = cast("Run", types.SimpleNamespace(steps=[recorded], trace_id=tid))
        instrumenting.enter_context(instrumented(one_step))
        framework = confined(lambda: langchain_tool(recorded, original, app=app))
        if not function and framework is None:
            raise ReplayRefused(
                f"step {step} does not record which function the tool is (recorded before "
                "otel-replay wrote otel_replay.tool.function)"
            )
        snapshot = recorded.snapshots.get("tool") or {}
        script = (original.snapshots.get("input") or {}).get("script")
        named = function or ""  # without a framework tool the step names its function (refused above otherwise)
        tool_func, current = framework or (
            confined(lambda: agents_function_tool(named, script=script) or load_entrypoint(named, script=script)),
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
            sandbox=shown["text"],  # the tool's module was imported already, on the confined thread
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
                result = confined(lambda: _guarded_call(session, tool_replay))
            except ReplayInterrupt:
                pass
            except Exception as exc:  # noqa: BLE001 - the tool's failure is the result
                outcome_error = {"type": type(exc).__name__, "message": str(exc)}
            setup.flush()
        audit_journal.finished(journal, session)
        ingest(opened)
        replayed = load_replay(opened, session.trace_id, spans)
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
            sandbox=shown["text"],
        )
    finally:
        instrumenting.close()
        if close_store:
            opened.close()


def _guarded_call(session: ReplaySession, func: Callable[[], Any]) -> Any:
    """The tool's replay under the side-effect guard when the session's mode calls for it (mock)."""
    with guard.agent_call(session):
        return call_entrypoint(func, (), {})
