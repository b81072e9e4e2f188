"""Replay a recorded run by trace id: load it, run it again under a :class:`ReplaySession`, report the result.

Three separate parts, as in Temporal's replayer: load the history (the original run from the store), replay
it (dry: no code runs; mock / deterministic / live: the recorded entrypoint runs again with the recorded
input while the session answers its calls), and report (a frozen :class:`ReplayResult` with divergences and
a diff). Refusals (unknown trace, schema, entrypoint not importable) raise :class:`ReplayRefused` before
anything runs; a live replay whose recording holds a write/high tool with no approval given for this replay
is refused before anything runs too, as a ``refused`` result recorded as a root span (see
:mod:`.riskytools`); a missing approval met during a live replay ends it with the refusal recorded. Every
replay is recorded as a new trace linked to the original, whose rows are never touched.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from .. import revival, semconv
from .._gc import gc_frozen, gc_paused
from ..errors import ReplayRefused as ReplayRefused  # re-exported: otel_replay.replay.engine.ReplayRefused
from ..exporting import setup
from ..recording import ReplayInterrupt, agent, identity, interrupt_in, replaying
from ..runs import Run
from ..semconv import ReplayMode
from . import volatile
from .dry import has_marker, record_dry, record_root
from .dry import readiness as readiness  # re-exported: otel_replay.replay.engine.readiness
from .entrypoint import instrumented
from .entrypoint import load_entrypoint as load_entrypoint  # re-exported: otel_replay.replay.engine.load_entrypoint
from .entrypoint import recorded_sdks as recorded_sdks  # re-exported: otel_replay.replay.engine.recorded_sdks
from .matching.policy import ReplayPolicy
from .raised import agent_exception
from .safety import guard, sandbox
from .safety import journal as audit_journal
from .safety.approvals import Approvals
from .safety.riskytools import RiskyTool, preflight_refusal, unapproved
from .session import ApprovalRequired, Divergence, ReplaySession, callable_mocks, os_user, revive
from .storing import capturing, ingest
from .volatile import VolatileRule


@dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """What one replay did and found."""

    replay_trace_id: str | None
    replay_run_id: str | None
    original_trace_id: str
    mode: str
    from_step: int | None
    outcome: str
    """``matched``, ``diverged`` or ``refused``."""
    divergences: tuple[Divergence, ...]
    approvals: tuple[str, ...]
    """The approval specs as given (``NAME``, ``NAME:N``, ``NAME:*``)."""
    actor: str
    reason: str | None
    refusal: str | None = None
    executions: dict[str, int] = field(default_factory=dict)
    """Real executions per approved tool in this replay (0 for an approved tool that never ran)."""
    diff: Any = None
    """A :class:`~otel_replay.replay.diff.RunDiff` of the original against the replay."""
    readiness: dict[str, Any] | None = None
    """Dry replays: integrity and what each other mode still needs."""
    schema_changes: tuple[dict[str, Any], ...] = ()
    """Tools whose recorded ``schema_version`` differs from the current code's."""
    replay: Run | None = field(default=None, repr=False)
    original: Run | None = field(default=None, repr=False)
    """The run that was replayed, as loaded for the replay."""
    allow_side_effects: bool = False
    """True when the side-effect guard was turned off for this replay (``--allow-side-effects``)."""
    notes: tuple[str, ...] = ()
    """Things the user should know that are not divergences, each said once (recorded values of types no one
    registered with :func:`otel_replay.register_type`, replayed as plain dicts)."""
    not_firewalled: tuple[str, ...] = ()
    """Tools the model asked for in the original run that no tool step recorded (an undecorated tool of a
    plain tool loop): no replay answers them from the recording (see :mod:`otel_replay.replay.matching.toolcalls`)."""
    agent_error: dict[str, Any] | None = None
    """What the replayed agent raised, if it raised: ``{type, message, file, line, function}`` with the
    agent's own frame (see :mod:`otel_replay.replay.raised`); None when it returned or was stopped."""
    refused_call: dict[str, Any] | None = None
    """The call a live replay refused: ``{kind, name, step_index, risk, approve_with}``, ``approve_with``
    being the exact ``--approve`` flag that allows it (None when no approval can: a redaction marker)."""
    sandbox: str = ""
    """What stopped unrecorded side effects: ``landlock ABI n`` (the kernel sandbox and the audit hooks),
    ``audit hooks only`` or ``none`` (live, ``--allow-side-effects``); see :mod:`otel_replay.replay.safety.sandbox`.
    A dry replay says what an offline replay of the run would get."""
    allowed_effects: tuple[str, ...] = ()
    """Paths and addresses the person replaying allowed for this replay (``--allow-path``, ``--allow-address``),
    as ``path:/abs/path`` and ``address:HOST:PORT``."""
    unfirewalled_risky: tuple[str, ...] = ()
    """Recorded write/high tools outside the firewall of the current code: in a dry replay, those whose
    recorded function no longer carries ``@otel_replay.tool`` in its source; in a live replay, those the model
    asked for with no tool step answering them (the replay is then ``refused``). See
    :mod:`otel_replay.replay.safety.riskytools`."""
    refused_before_start: bool = False
    """True when a live replay was refused before anything ran (a recorded write/high tool without an
    approval given for this replay): no agent code was imported or called."""
    tape: dict[str, list[dict[str, Any]]] | None = None
    """Replays given a :class:`~otel_replay.replay.matching.policy.ReplayPolicy`: the tool tape both ways (``unused``,
    ``drift``, ``refused``, ``injected``, see :class:`otel_replay.lab.model.PairResult`; ``mocked`` too when
    ``mocks=`` were given, which answer their tools instead of the tape); None otherwise."""

    @property
    def ready_modes(self) -> list[str] | None:
        """Dry replays: the modes the run can be replayed in now (nothing missing); None for other modes."""
        if self.readiness is None:
            return None
        return [mode for mode, info in self.readiness.get("modes", {}).items() if info.get("ready")]

    @property
    def diverged(self) -> bool:
        """True when the replay did not follow the original (a divergence, or a changed diff)."""
        return self.outcome == "diverged"

    @property
    def first_divergence(self) -> Divergence | None:
        """The divergence at the lowest original step index."""
        if not self.divergences:
            return None
        return min(self.divergences, key=lambda d: (d.step_index is None, d.step_index or 0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``otel-replay replay --json``)."""
        first = self.first_divergence
        return {
            "replay_trace_id": self.replay_trace_id,
            "replay_run_id": self.replay_run_id,
            "original_trace_id": self.original_trace_id,
            "mode": self.mode,
            "from_step": self.from_step,
            "outcome": self.outcome,
            "diverged": self.diverged,
            "first_divergence": first.to_dict() if first is not None else None,
            "divergences": [d.to_dict() for d in self.divergences],
            "approvals": list(self.approvals),
            "executions": dict(self.executions),
            "actor": self.actor,
            "reason": self.reason,
            "refusal": self.refusal,
            "diff": self.diff.to_json() if self.diff is not None else {},
            "readiness": self.readiness,
            "schema_changes": list(self.schema_changes),
            "allow_side_effects": self.allow_side_effects,
            "notes": list(self.notes),
            "not_firewalled": list(self.not_firewalled),
            "agent_error": self.agent_error,
            "refused_call": self.refused_call,
            "ready_modes": self.ready_modes,
            "sandbox": self.sandbox,
            "allowed_effects": list(self.allowed_effects),
            "unfirewalled_risky": list(self.unfirewalled_risky),
            "refused_before_start": self.refused_before_start,
            **({"tape": self.tape} if self.tape is not None else {}),
        }


# ------------------------------------------------------------------------------------------- loading


# -------------------------------------------------------------------------------------------- replay


def _checked(mode: str | ReplayMode, from_step: int | None, reason: str | None) -> ReplayMode:
    try:
        mode = ReplayMode(mode)
    except ValueError:
        raise ReplayRefused(f"unknown mode {mode!r}: use dry, mock, deterministic, live or whatif") from None
    if from_step is not None and (isinstance(from_step, bool) or not isinstance(from_step, int) or from_step < 0):
        raise ReplayRefused(f"from_step must be a step index >= 0, got {from_step!r}")
    if from_step is not None and mode is ReplayMode.DRY:
        raise ReplayRefused("--from-step needs a mode that runs code (mock, deterministic or live)")
    if mode is ReplayMode.LIVE and not (reason and reason.strip()):
        raise ReplayRefused("a live replay calls real models and tools: give a reason (--reason TEXT)")
    if mode is ReplayMode.WHATIF and not (reason and reason.strip()):
        raise ReplayRefused("a whatif replay calls real models: give a reason (--reason TEXT)")
    return mode


def replay(
    trace_id: str,
    *,
    mode: str | ReplayMode,
    from_step: int | None = None,
    approvals: Approvals | Sequence[str] = (),
    actor: str | None = None,
    reason: str | None = None,
    store: Any = None,
    entrypoint: str | None = None,
    mocks: Mapping[str, Any] | None = None,
    allow_side_effects: bool = False,
    volatile_keys: Iterable[str | VolatileRule] = (),
    policy: ReplayPolicy | None = None,
    allow_paths: Sequence[str] = (),
    allow_addresses: Sequence[str] = (),
) -> ReplayResult:
    """Replay the run recorded as ``trace_id`` and compare it with the original.

    ``mode``: ``dry`` (no code runs: integrity, readiness, state walk), ``mock`` (the entrypoint runs again;
    every model, tool and retrieval call is answered from the recording or ``mocks``), ``deterministic`` (as
    mock, but a changed model request or tool arguments stop the replay as a divergence), ``live`` (real
    calls; ``write``/``high`` tools only when named in ``approvals``; needs a ``reason``). ``from_step=N``
    answers steps before N from the recording and runs the rest per ``mode``.

    In every mode but ``live``, the agent's code runs under the side-effect guard
    (:mod:`otel_replay.replay.safety.guard`): process spawns, file changes outside the temp folder and network
    connections it makes are blocked and reported as ``side_effect`` divergences. ``allow_side_effects=True``
    turns the guard off (recorded on the replay's root span as ``otel_replay.replay.allow_side_effects``).

    Volatile ids (message, response and tool-call ids, ``created``, system fingerprints) are put aside
    whenever recorded and replayed values are compared (:mod:`otel_replay.replay.volatile`);
    ``volatile_keys`` adds keys of your own (names, or ``VolatileRule`` objects) for this replay.

    ``policy`` (a :class:`~otel_replay.replay.matching.policy.ReplayPolicy`, what a lab changes) sets how the tool tape
    answers, injected tool faults and the overrides applied to every model call.

    Offline replays (``mock``, ``deterministic``) import and run the agent in a thread the kernel confines
    first, where it offers Linux Landlock (``OTEL_REPLAY_SANDBOX``, see :mod:`otel_replay.replay.safety.sandbox`);
    ``allow_paths`` (files or folders) and ``allow_addresses`` (``HOST:PORT``) let the agent change or reach
    just those, recorded on the replay's root span and in its audit record.

    Raises :class:`ReplayRefused` when the replay cannot start; returns a :class:`ReplayResult` otherwise
    (``outcome`` ``refused`` when a live replay stopped before an unapproved call).
    """
    from ..records import parse_trace_id

    checked = _checked(mode, from_step, reason)
    budget = Approvals.of(approvals)  # a bad spec is refused before anything is opened
    volatile_keys = volatile.as_rules(volatile_keys)
    tid = parse_trace_id(trace_id)
    from ..storage.store import open_given  # the store (and the rows encoder) load only when a store is used

    opened, close_store = open_given(store)
    try:
        with gc_paused():  # loading, ingesting, rebuilding and diffing: no cycles, see _gc
            original = opened.load_run(tid)
        with revival.noting() as unregistered, volatile.extended(volatile_keys):
            result = _replay(
                original,
                checked,
                from_step=from_step,
                approvals=budget,
                actor=actor,
                reason=reason,
                store=opened,
                entrypoint=entrypoint,
                mocks=mocks,
                allow_side_effects=allow_side_effects,
                policy=policy,
                allow_paths=allow_paths,
                allow_addresses=allow_addresses,
            )
        return _with_notes(result, unregistered)
    finally:
        if close_store:
            opened.close()


def replay_run(
    original: Run,
    *,
    mode: str | ReplayMode,
    from_step: int | None = None,
    approvals: Sequence[str] = (),
    actor: str | None = None,
    reason: str | None = None,
    entrypoint: str | None = None,
    mocks: Mapping[str, Any] | None = None,
    allow_side_effects: bool = False,
    volatile_keys: Iterable[str | VolatileRule] = (),
    policy: ReplayPolicy | None = None,
    allow_paths: Sequence[str] = (),
    allow_addresses: Sequence[str] = (),
) -> ReplayResult:
    """Replay a run held in memory (a case file's trace) as :func:`replay` does, without any store: the replay
    is recorded through the configured exporter as usual and read back from the spans this process saw."""
    checked = _checked(mode, from_step, reason)
    volatile_keys = volatile.as_rules(volatile_keys)
    with revival.noting() as unregistered, volatile.extended(volatile_keys):
        result = _replay(
            original,
            checked,
            from_step=from_step,
            approvals=approvals,
            actor=actor,
            reason=reason,
            store=None,
            entrypoint=entrypoint,
            mocks=mocks,
            allow_side_effects=allow_side_effects,
            policy=policy,
            allow_paths=allow_paths,
            allow_addresses=allow_addresses,
        )
    return _with_notes(result, unregistered)


def _with_notes(result: ReplayResult, unregistered: list[str]) -> ReplayResult:
    """``result`` with the note about the unregistered recorded types the replay met (once, naming them)."""
    note = revival.unregistered_note(unregistered)
    return dataclasses.replace(result, notes=(*result.notes, note)) if note else result


def _replay(
    original: Run,
    mode: ReplayMode,
    *,
    from_step: int | None,
    approvals: Approvals | Sequence[str],
    actor: str | None,
    reason: str | None,
    store: Any,
    entrypoint: str | None,
    mocks: Mapping[str, Any] | None,
    allow_side_effects: bool = False,
    policy: ReplayPolicy | None = None,
    allow_paths: Sequence[str] = (),
    allow_addresses: Sequence[str] = (),
    external: Callable[[], Any] | None = None,
) -> ReplayResult:
    tid = original.trace_id
    mocks = callable_mocks(mocks)
    actor, reason = scrubbed_text(actor or os_user()), scrubbed_text(reason)
    major = semconv.schema_major(original.schema_version or "")
    if major not in semconv.READABLE_MAJORS:
        raise ReplayRefused(
            f"run {tid} was recorded with convention {original.schema_version!r}; this otel-replay replays "
            f"{semconv.READABLE_TEXT}: upgrade otel-replay or export the run with the version that wrote it"
        )
    if from_step is not None and original.steps and from_step > max(s.index for s in original.steps) + 1:
        raise ReplayRefused(
            f"run {tid} has steps 0..{max(s.index for s in original.steps)}; --from-step {from_step} is past its end"
        )
    allowed_paths = sandbox.check_paths(allow_paths)
    allowed_addresses = sandbox.check_addresses(allow_addresses)
    enforcement = sandbox.plan(mode, allow_side_effects=allow_side_effects, from_step=from_step)
    # The side-effect guard covers every mode but live (see guard.guards), unless the person replaying allowed them.
    session = ReplaySession(
        original=original,
        mode=mode,
        from_step=from_step,
        approvals=approvals,
        mocks=mocks,
        actor=actor,
        reason=reason,
        allow_side_effects=allow_side_effects,
        policy=policy,
        allow_paths=allowed_paths,
        allow_addresses=allowed_addresses,
        sandbox=enforcement.text,
    )
    from .matching.toolcalls import not_firewalled

    unfirewalled = tuple(not_firewalled(original))
    if mode is ReplayMode.DRY:
        report = readiness(original, entrypoint=entrypoint)
        report["sandbox"] = {
            "enforcement": enforcement.text,
            "not_covered": sandbox.gaps(enforcement),
            "live_from_step": sandbox.live_prefix(),
        }
        record_dry(session, original, report)
        setup.flush()
        ingest(store)
        from .diff import diff_runs

        return ReplayResult(
            replay_trace_id=session.trace_id,
            replay_run_id=session.run_id,
            original_trace_id=tid,
            mode=mode.value,
            from_step=None,
            outcome="matched" if report["integrity"]["ok"] else "diverged",
            divergences=tuple(
                Divergence(step_index=None, kind="integrity", reason=p) for p in report["integrity"]["problems"]
            ),
            approvals=session.approvals,
            actor=actor,
            reason=reason,
            diff=diff_runs(original, original),
            readiness=report,
            original=original,
            allow_side_effects=session.allow_side_effects,
            not_firewalled=unfirewalled,
            unfirewalled_risky=tuple(
                name for name, tool in report["risky_tools"].items() if tool["declared_now"] is False
            ),
            tape=session.tape_result(),
            sandbox=enforcement.text,
        )
    if mode is ReplayMode.LIVE:
        missing = unapproved(original, from_step, session.approval_budget)
        if missing:
            return _refused_before_start(session, original, store, missing, unfirewalled)
    if external is not None:  # the agent runs in another process: nothing of it is loaded, guarded or confined
        session.sandbox = EXTERNAL_SANDBOX
        return _run_replay(session, original, external, store, lambda call: call(), call=_unguarded_call)

    spec = entrypoint or original.entrypoint or ""
    script = (original.snapshots.get("input") or {}).get("script")
    module_name = spec.partition(":")[0] if not spec.startswith("__main__:") else None
    note = sandbox.imported_before(module_name, enforcement)  # raises under require
    if note is not None:
        session.note(note)

    def unconfined(weaker: sandbox.Enforcement) -> None:
        session.sandbox = weaker.text

    def load() -> Callable[..., Any]:
        try:
            with guard.agent_call(session):  # what the module does at import is the agent's code too
                return load_entrypoint(spec, script=script, given=bool(entrypoint))
        except ReplayRefused as exc:
            raise _import_refusal(exc, session) from None

    # the agent's import, then its call, on one thread the kernel confines first (see sandbox.Confinement)
    confinement = sandbox.Confinement(
        enforcement, allow_paths=allowed_paths, allow_addresses=allowed_addresses, on_unconfined=unconfined
    )
    with instrumented(original), confinement:
        fresh = bool(module_name) and module_name not in sys.modules
        func = confinement.call(load)
        session.prefix_supervisor = confinement.supervisor
        if fresh and session.sandbox.startswith("landlock"):
            sandbox.note_confined_import(module_name)
        result = _run_replay(session, original, func, store, confinement.call)
    return dataclasses.replace(result, not_firewalled=unfirewalled) if unfirewalled else result


def _import_refusal(exc: ReplayRefused, session: ReplaySession) -> ReplayRefused:
    """The refusal of an entrypoint whose module could not be imported: when the guard or the kernel refused
    what the module does at import, say what and the ways out; any other refusal as it was."""
    blocked = [d.reason for d in session.divergences if d.kind == guard.DIVERGENCE_KIND]
    cause = exc.__cause__
    kernel = session.sandbox.startswith("landlock")
    denied = (isinstance(cause, OSError) and cause.errno in (1, 13)) or "unable to open database" in str(cause)
    if not blocked and not (kernel and cause is not None and denied):
        return exc
    if blocked:
        what = blocked[0].removeprefix("unrecorded side effect: ")
    else:
        what = scrubbed_text(f"{type(cause).__name__}: {cause}")
    return ReplayRefused(
        f"the agent's module could not be imported under the replay's sandbox ({session.sandbox}): {what} was "
        "refused; nothing else ran. Allow that one path or address for this replay (--allow-path PATH, "
        "--allow-address HOST:PORT; recorded in its audit), every effect (--allow-side-effects), or replay it "
        "live (--mode live --reason TEXT)"
    )


def _refused_before_start(
    session: ReplaySession, original: Run, store: Any, missing: list[RiskyTool], unfirewalled: tuple[str, ...]
) -> ReplayResult:
    """A live replay refused before anything runs: recorded write/high tools with no approval given for this
    replay. The refusal is recorded as the replay's root span (so the audit lists the attempt); no agent code
    is imported or called, no model or tool is called."""
    import json

    refusal, flags = preflight_refusal(missing)
    divergences = tuple(Divergence(step_index=tool.step_index, kind="approval", reason=refusal) for tool in missing)
    session.refusal = refusal
    record_root(
        session,
        original,
        outcome="refused",
        events=[(d.kind, d.reason, d.step_index) for d in divergences],
        attributes={semconv.REPLAY_EXECUTIONS: json.dumps(session.executions(), sort_keys=True)},
        refused_tools=[(tool.name, tool.risk) for tool in missing],
    )
    setup.flush()
    ingest(store)
    first = missing[0]
    return ReplayResult(
        replay_trace_id=session.trace_id,
        replay_run_id=session.run_id,
        original_trace_id=original.trace_id,
        mode=session.mode.value,
        from_step=session.from_step,
        outcome="refused",
        divergences=divergences,
        approvals=session.approvals,
        actor=session.actor,
        reason=session.reason,
        refusal=refusal,
        executions=session.executions(),
        original=original,
        allow_side_effects=session.allow_side_effects,
        not_firewalled=unfirewalled,
        refused_call={
            "kind": "tool",
            "name": first.name,
            "step_index": first.step_index,
            "risk": first.risk,
            "approve_with": flags,
        },
        refused_before_start=True,
        sandbox=session.sandbox,
        tape=session.tape_result(),
    )


@overload
def scrubbed_text(text: str) -> str: ...


@overload
def scrubbed_text(text: None) -> None: ...


def scrubbed_text(text: str | None) -> str | None:
    """Free text given for the audit (actor, reason), with any secret in it redacted like every value."""
    if text is None:
        return None
    return setup.runtime().redactor.scrub_text(str(text), "replay")[0]


def _run_replay(
    session: ReplaySession,
    original: Run,
    func: Callable[..., Any],
    store: Any,
    confined: Callable[[Callable[[], Any]], Any],
    *,
    call: Callable[[ReplaySession, Callable[..., Any], Any, Any], Any] | None = None,
) -> ReplayResult:
    inp = original.snapshots.get("input") or {}
    args = revive(inp.get("args") or [])
    kwargs = revive(inp.get("kwargs") or {})
    if session.mode is ReplayMode.LIVE:
        redacted = has_marker({"args": inp.get("args"), "kwargs": inp.get("kwargs")})
        if redacted:
            raise ReplayRefused(
                f"input {', '.join(redacted)} was redacted in the recording and a live replay "
                "cannot restore it: have the agent read it from the environment"
            )
    if not hasattr(func, "__otel_replay__"):
        func = agent(original.agent)(func)
    journal = audit_journal.started(session) if audit_journal.needs_record(session) else None
    stopped: ReplayInterrupt | None = None
    raised: dict[str, Any] | None = None
    with (
        replaying(session),
        capturing(session, store) as capture,
        identity(tenant=inp.get("tenant"), role=inp.get("role"), session=inp.get("session")),
    ):
        try:
            # The agent's code only, never the engine's own work; the loaded run is kept out of the full
            # collections the recording sets off (see _gc).
            with gc_frozen():
                confined(lambda: (call or _guarded_call)(session, func, args, kwargs))
        except ReplayInterrupt as stop:
            stopped = stop
        except Exception as exc:  # noqa: BLE001 - the agent raising is a result, compared with the original
            raised = agent_exception(exc, scrub=lambda text: scrubbed_text(text) or "")
        except BaseException as exc:  # a task group's group around the replay's stop (asyncio, anyio, mcp)
            stopped = interrupt_in(exc)
            if stopped is None:
                raise
        setup.flush()
    audit_journal.finished(journal, session, outcome=None if session.run_id is not None else "refused")
    if session.run_id is None:
        raise ReplayRefused(
            f"the entrypoint {original.entrypoint!r} did not start a run: it must be (or call) the "
            "@otel_replay.agent function the run was recorded with; pass --app module:function"
        )
    from .diff import diff_runs

    with gc_paused():  # storing, rebuilding and diffing: no cycles, see _gc
        capture.store_replay()
        replayed = capture.replay_run()
        diff = diff_runs(original, replayed) if replayed is not None else None
    # The outcome is the session's, as written on the replay's root span (and so in the audit): calls and
    # the run's output compared with the original. The diff details every section.
    # a refusal stopped the replay, or a recorded risky tool ran outside the firewall (found as the run ended)
    refusal = session.refusal if isinstance(stopped, ApprovalRequired) or session.undeclared_tools() else None
    return ReplayResult(
        replay_trace_id=session.trace_id,
        replay_run_id=session.run_id,
        original_trace_id=original.trace_id,
        mode=session.mode.value,
        from_step=session.from_step,
        outcome=session.outcome,
        divergences=tuple(session.divergences),
        approvals=session.approvals,
        actor=session.actor,
        reason=session.reason,
        refusal=refusal,
        executions=session.executions(),
        diff=diff,
        schema_changes=tuple(session.schema_changes),
        replay=replayed,
        original=original,
        allow_side_effects=session.allow_side_effects,
        agent_error=raised,
        refused_call=session.refused_call if refusal is not None else None,
        unfirewalled_risky=session.undeclared_tools(),
        notes=tuple(session.notes),
        tape=session.tape_result(),
        sandbox=session.sandbox,
        allowed_effects=session.allowed_effects,
    )


def _guarded_call(session: ReplaySession, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    with guard.agent_call(session):
        return call_entrypoint(func, args, kwargs)


def _unguarded_call(session: ReplaySession, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    return func(*args, **kwargs)


EXTERNAL_SANDBOX = "none: the agent runs in another process (its own effects are its own)"
"""``sandbox`` of a replay whose agent runs elsewhere (:func:`replay_external`)."""


def replay_external(
    original: Run,
    *,
    mode: str | ReplayMode,
    agent: Callable[[], Any],
    actor: str | None = None,
    reason: str | None = None,
    store: Any = None,
) -> ReplayResult:
    """Replay a run whose agent runs in another process (an agent in any language against ``otel-replay
    serve``): ``agent`` is called inside the replay's run and returns when that process is done; the calls it
    records meanwhile through the recording API (a model call per request it serves) are matched and answered
    as an in-process agent's would be, the replay is stored in ``store`` when it ends, and its result is the
    one :func:`replay` returns. ``mode``: ``mock`` or ``deterministic``. Nothing is imported, guarded or
    confined here: no agent code runs in this process."""
    checked = _checked(mode, None, reason)
    if checked not in (ReplayMode.MOCK, ReplayMode.DETERMINISTIC):
        raise ReplayRefused(f"a replay of an agent in another process is mock or deterministic, not {checked.value}")
    with revival.noting() as unregistered:
        result = _replay(
            original,
            checked,
            from_step=None,
            approvals=(),
            actor=actor,
            reason=reason,
            store=store,
            entrypoint=None,
            mocks=None,
            external=agent,
        )
    return _with_notes(result, unregistered)


def call_entrypoint(func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """Call the entrypoint; a coroutine function runs in its own event loop, on a fresh thread (with this
    context) when the caller is itself inside a running loop (Jupyter, pytest-asyncio, a web server)."""
    if not inspect.iscoroutinefunction(func):
        return func(*args, **kwargs)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(func(*args, **kwargs))
    context = contextvars.copy_context()
    outcome: dict[str, Any] = {}

    def run_in_thread() -> None:
        try:
            outcome["value"] = context.run(asyncio.run, func(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run_in_thread, name="otel-replay-async-replay")
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def diff(
    trace_id_a: str, trace_id_b: str, *, store: Any = None, volatile_keys: Iterable[str | VolatileRule] = ()
) -> Any:
    """Diff two stored runs (any two: an original and its replay, two recordings) → ``RunDiff``; volatile ids
    compare as placeholders (``volatile_keys`` adds keys of your own, see :func:`replay`)."""
    from ..records import parse_trace_id
    from .diff import diff_runs

    a, b = parse_trace_id(trace_id_a), parse_trace_id(trace_id_b)
    rules = volatile.as_rules(volatile_keys)  # bad rules are refused before the store is opened
    from ..storage.store import open_given  # the store (and the rows encoder) load only when a store is used

    opened, close_store = open_given(store)
    try:
        with volatile.extended(rules):
            return diff_runs(opened.load_run(a), opened.load_run(b))
    finally:
        if close_store:
            opened.close()
