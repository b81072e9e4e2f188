"""One replay in progress: how each call the replayed agent makes is matched and answered.

The recording layer asks the active :class:`ReplaySession` at every step call (``intercept``) and for every
non-deterministic value (``next_value``). The session walks the original run's steps in order, matches each
call by kind, name and order, checks it by its hash, decides whether it is answered from the recording, by a
given mock, or executed, and keeps every divergence as data.

Rules it enforces in every mode: a ``write`` or ``high`` tool never executes without an approval given for
this replay, one approval per execution (approvals recorded in the original never count), and a tool's risk
is the higher of its recorded and its current one; nothing is restored from a redacted value; a call the
recording cannot answer is a divergence, never a silent guess.
"""

from __future__ import annotations

import bisect
import json
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, TraceFlags

from .. import semconv
from ..errors import ReplayRefused
from ..recording import DivergenceStop, Served, interrupt_in
from ..runs import Run, Step
from ..semconv import ReplayMode
from . import volatile
from .answers import callable_mocks as callable_mocks  # re-exported: otel_replay.replay.session.callable_mocks
from .answers import mock_answer, recorded_answer
from .matching import overrides, tape
from .matching.divergence import Divergence as Divergence  # re-exported: otel_replay.replay.session.Divergence
from .matching.divergence import TextDiff
from .matching.policy import ReplayPolicy
from .matching.sentdiff import sent_diff
from .matching.toolcalls import calls_asked, replay_code_tools, unrecorded_code_calls, unrecorded_results
from .reviving import RecordedError as RecordedError  # re-exported: otel_replay.replay.session.RecordedError
from .reviving import revive as revive  # re-exported: otel_replay.replay.session.revive
from .reviving import revive_exception as revive_exception  # re-exported
from .safety.approvals import Approvals, executions_of
from .safety.guard import check_children, record_refused
from .safety.journal import os_user as os_user  # re-exported: otel_replay.replay.session.os_user
from .safety.journal import root_mac
from .safety.refusals import (
    ApprovalRequired as ApprovalRequired,
)  # re-exported: otel_replay.replay.session.ApprovalRequired
from .safety.refusals import MarkerRefused as MarkerRefused  # re-exported
from .safety.refusals import higher_risk as higher_risk  # re-exported
from .safety.refusals import live_tool, refuse_markers
from .safety.riskytools import UndeclaredWatch, undeclared_refusal
from .safety.seccomp import Supervisor
from .values import RecordedValues

_LOOKAHEAD = 8
"""How many recorded steps ahead a call may match before it counts as an extra call."""


def _overlap(a: Step, b: Step) -> bool:
    """Whether two recorded steps ran at the same time (their spans overlap)."""
    return a.start_ns < b.start_ns + b.duration_ns and b.start_ns < a.start_ns + a.duration_ns


_HASH_ATTR = {
    "tool": semconv.TOOL_ARGS_HASH,
    "model": semconv.MODEL_REQUEST_HASH,
    "retrieval": semconv.RETRIEVAL_ARGS_HASH,
}


def _matched_kind(kind: str) -> str:
    """The kind a step is matched and answered as: a handoff is the tool call it is (and a 1.x recording has
    it as a ``tool`` step)."""
    return "tool" if kind in semconv.TOOL_CALL_KINDS else kind


class ReplaySession:
    """Matches and answers the calls of one replay; collects divergences and what was executed."""

    def __init__(
        self,
        *,
        original: Run,
        mode: ReplayMode,
        from_step: int | None,
        approvals: Approvals | Sequence[str],
        mocks: Mapping[str, Any] | None,
        actor: str,
        reason: str | None,
        allow_side_effects: bool = False,
        policy: ReplayPolicy | None = None,
        allow_paths: Sequence[str] = (),
        allow_addresses: Sequence[str] = (),
        sandbox: str = "",
    ) -> None:
        self.original = original
        self.policy = policy
        """What a lab changes about this replay (None: a plain replay)."""
        self.mode = mode
        self.from_step = from_step
        self.approval_budget = Approvals.of(approvals)
        self.approvals = self.approval_budget.specs
        """The approval specs as given (``NAME``, ``NAME:N``, ``NAME:*``)."""
        self.approved_runs: dict[str, int] = {}
        """Real executions of write/high tools in this replay, per tool name (each took one approval)."""
        self.planned_run_id = str(uuid.uuid4())
        """Run id of the replay's root, drawn before the run starts so the audit journal can name it."""
        self.os_user = os_user()
        self.mocks = dict(mocks or {})
        self.actor = actor
        self.reason = reason
        self.allow_side_effects = bool(allow_side_effects)
        """True when the person replaying turned the side-effect guard off (``--allow-side-effects``)."""
        self.allow_paths = tuple(allow_paths)
        """Files and folders the agent may change in this replay (``--allow-path``), absolute."""
        self.allow_addresses = tuple(allow_addresses)
        """``HOST:PORT`` addresses the agent may connect to in this replay (``--allow-address``)."""
        self.sandbox = sandbox
        """What stops unrecorded side effects (see :class:`otel_replay.replay.safety.sandbox.Enforcement`)."""
        self.past_recorded_prefix = from_step == 0
        """A replay from step N: True once the recorded step N-1 was answered or a call at or past step N was
        made (what the agent does from then on is the live part)."""
        self.prefix_supervisor: Supervisor | None = None
        """A live replay from step N whose thread runs under the seccomp filter: its supervisor
        (:class:`otel_replay.replay.safety.seccomp.Supervisor`), told when the recorded steps begin (the run
        starts) and end (:meth:`_leave_prefix`)."""
        self._all: list[Step] = [s for s in original.steps if s.kind != semconv.StepKind.AGENT.value]
        self._by_span: dict[str, Step] = {s.span_id: s for s in original.steps if s.span_id}
        """Every recorded step (nested agents too) by its span id: the tree :meth:`_concurrent` walks."""
        self._models: dict[str, list[int]] = {}
        """The indices of the recorded model steps under each parent span, in order (see :meth:`_one_batch`)."""
        for s in sorted(self._all, key=lambda s: s.index):
            if s.kind == "model":
                self._models.setdefault(s.parent_span_id, []).append(s.index)
        self.tape: tape.ToolTape | None = None
        """A policy replay's tool tape (mock, deterministic, whatif): tool calls answered from it, see
        :mod:`otel_replay.replay.matching.tape`."""
        if from_step is not None and (policy is not None or mode is ReplayMode.WHATIF):
            what = "a whatif replay" if mode is ReplayMode.WHATIF else "a replay given a policy (a lab's replay)"
            raise ReplayRefused(f"{what} cannot start from a step: drop --from-step")
        if policy is not None and mode in tape.TAPE_MODES:
            self.tape = tape.ToolTape(
                self._all, policy=policy, trace_id=original.trace_id, rules=volatile.current_rules()
            )
        # The steps matched by kind, name and order: a tape answers tool calls, a whatif replay runs its models.
        by_order = {"tool"} if self.tape is not None else set()
        if mode is ReplayMode.WHATIF:
            by_order.add("model")
        self.recorded: list[Step] = [s for s in self._all if _matched_kind(s.kind) not in by_order]
        self._nested: dict[str, list[int]] = {}
        """The positions in :attr:`recorded` of the steps made inside each recorded step, by its span id."""
        for k, s in enumerate(self.recorded):
            for outer in self._path(s)[1:]:
                self._nested.setdefault(outer.span_id, []).append(k)
        self.cursor = 0
        """The first position of :attr:`recorded` not answered yet (positions after it may be: see _match)."""
        self._consumed: set[int] = set()
        self.notes: list[str] = []
        """Things the user should know that are not divergences (an override with no place to go), each once."""
        self.divergences: list[Divergence] = []
        self.executed: list[tuple[str, str]] = []
        self.schema_changes: list[dict[str, Any]] = []
        self.refusal: str | None = None
        self.refused_call: dict[str, Any] | None = None
        """The call a live replay refused: ``{kind, name, step_index, risk, approve_with}`` (``approve_with``
        is the exact ``--approve`` flag that allows it, None when no approval can)."""
        self.volatile_rules = volatile.current_rules()
        """The rules that put volatile ids aside when recorded and replayed values are compared."""
        self.run_id: str | None = None
        self.trace_id: str | None = None
        self.root_span_id: str | None = None
        self._lock = threading.Lock()
        self._values = RecordedValues(original)
        self._models_run = 0
        # Tool calls asked for by the last model answer served from the recording, not yet answered by a tool
        # step of this replay: (name, call id, recorded model step).
        self._asked: list[tuple[str, str | None, int]] = []
        self._code_tools = replay_code_tools(original)  # a code agent's tools, checked in its model's code
        self.watch: UndeclaredWatch | None = UndeclaredWatch(original) if mode is ReplayMode.LIVE else None
        """A live replay: the recorded write/high tools it must see as tool steps (see riskytools)."""
        self._undeclared: list[str] = []

    # -------------------------------------------------------------------------------- hooks of the recorder

    def root_attributes(self) -> dict[str, Any]:
        """Attributes of the replay's root span."""
        return {
            semconv.RUN_KIND: semconv.RunKind.REPLAY.value,
            semconv.REPLAY_OF_TRACE_ID: self.original.trace_id,
            semconv.REPLAY_OF_RUN_ID: self.original.run_id,
            semconv.REPLAY_MODE: self.mode.value,
            semconv.REPLAY_FROM_STEP: self.from_step,
            semconv.REPLAY_ACTOR: self.actor,
            semconv.REPLAY_REASON: self.reason,
            semconv.REPLAY_APPROVALS: list(self.approvals),
            semconv.REPLAY_OS_USER: self.os_user,
            semconv.REPLAY_ALLOW_SIDE_EFFECTS: True if self.allow_side_effects else None,
            semconv.REPLAY_SANDBOX: self.sandbox or None,
            semconv.REPLAY_ALLOWED_EFFECTS: list(self.allowed_effects) or None,
            semconv.REPLAY_LAB_ID: self.policy.lab_id if self.policy is not None else None,
            semconv.REPLAY_LAB_LANE: self.policy.lane if self.policy is not None else None,
            semconv.REPLAY_BISECT_ID: self.policy.bisect_id if self.policy is not None else None,
            semconv.REPLAY_BISECT_REVISION: self.policy.bisect_revision if self.policy is not None else None,
        }

    @property
    def allowed_effects(self) -> tuple[str, ...]:
        """The paths and addresses allowed for this replay, as ``path:/abs`` and ``address:HOST:PORT``."""
        return (*(f"path:{p}" for p in self.allow_paths), *(f"address:{a}" for a in self.allow_addresses))

    def take_run_id(self) -> str | None:
        """The planned run id for the replay's root run (the first run started under the session), else None."""
        return self.planned_run_id if self.run_id is None else None

    def executions(self) -> dict[str, int]:
        """Real executions per approved tool in this replay (0 for an approved tool that never ran)."""
        with self._lock:
            counted = dict(self.approved_runs)
        return executions_of(self.approval_budget, counted)

    def root_links(self) -> list[Link]:
        """A link from the replay's root to the original's root span."""
        roots = [s for s in self.original.spans if not s.parent_span_id]
        root = next((s for s in roots if semconv.RUN_ID in s.span_attributes), roots[0] if roots else None)
        if root is None:
            return []
        context = SpanContext(
            trace_id=int(root.trace_id, 16),
            span_id=int(root.span_id, 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        return [Link(context, {semconv.REPLAY_OF_RUN_ID: self.original.run_id})]

    def run_started(self, *, run_id: str, span: trace.Span) -> None:
        """The replay's root span started (only the first run started under the session counts)."""
        if self.run_id is None:
            ctx = span.get_span_context()
            self.run_id = run_id
            self.trace_id = f"{ctx.trace_id:032x}"
            self.root_span_id = f"{ctx.span_id:016x}"
            if self.prefix_supervisor is not None and not self.past_recorded_prefix:
                try:
                    self.prefix_supervisor.confine()
                except OSError as exc:
                    raise DivergenceStop(f"replay stopped before the recorded steps: {exc}") from None
            try:  # never into the agent: a row without a MAC is marked by the audit
                span.set_attribute(semconv.REPLAY_AUDIT_MAC, root_mac(self))
            except Exception:  # noqa: BLE001
                pass

    def next_value(self, kind: str) -> tuple[Any] | None:
        """The next recorded non-deterministic value of ``kind``, unless this replay draws fresh ones."""
        if self.mode is ReplayMode.LIVE and self.from_step is None:
            return None
        return self._values.next(kind)

    def intercept(
        self, *, step: Any, key: str | None, arguments: str | None, sent: str | None = None, markers: Sequence[str] = ()
    ) -> Served | None:
        """Decide how one step call is answered: a :class:`Served` answer, None to execute, or raise.

        ``key`` is the call's hash, ``arguments`` its arguments as JSON (for a mock), ``sent`` what it sends as
        JSON (a model's request, else its arguments), shown as a diff when it differs from the recording.
        ``markers``: paths of the redaction markers a live model call would really send (it is refused)."""
        kind = _matched_kind(step.kind.value)
        name = step.name
        self._check_tool_results(kind, name, sent)
        if self.watch is not None:
            self._watch_call(kind, name, sent)
        if kind == "tool" and self.tape is not None:
            if name in self.mocks:  # the user's explicit mock answers that tool, not the tape
                return tape.mock_tool(self, self.tape, step, key, sent, arguments)
            return tape.answer_tool(self, self.tape, step, key, sent)
        if kind == "model" and self.mode is ReplayMode.WHATIF:
            self._whatif_model(name, markers)
            return None
        with self._lock:
            recorded = self._match(kind, name, key, sent)
        if kind == "tool":
            self._note_schema(recorded, step)
        if recorded is not None:
            recorded_key = recorded.attributes.get(_HASH_ATTR.get(kind, ""), "")
            # equal hashes agree: the stored text is only rebuilt when they differ
            if not tape.sends_same(recorded, _HASH_ATTR[kind], key, sent, self.volatile_rules):
                what = "request" if kind == "model" else "arguments"
                diff, texts = sent_diff(recorded, _HASH_ATTR[kind], sent, self.volatile_rules)
                self._diverge(
                    recorded.index,
                    what,
                    f"{kind} {name!r} was called with different {what} than step {recorded.index}",
                    expected=recorded_key,
                    actual=key,
                    diff=diff,
                    text_diffs=texts,
                )
                if self.mode is ReplayMode.DETERMINISTIC and not self._before_from_step(recorded):
                    raise DivergenceStop(
                        f"deterministic replay stopped at step {recorded.index}: {kind} {name!r} "
                        f"{what} differ from the recording"
                    )
        from_recording = recorded is not None and self._before_from_step(recorded)
        if not from_recording or (
            recorded is not None and self.from_step is not None and recorded.index >= self.from_step - 1
        ):
            self._leave_prefix()
        if self.mode is ReplayMode.LIVE and not from_recording:
            if kind == "model" and markers:
                refuse_markers(self, name, recorded, markers)
            return self._live(step, kind, name, recorded)
        if name in self.mocks and not from_recording:
            return self._mock(name, arguments)
        if recorded is None:
            closest = self._closest(kind, name)
            reason = f"the recording has no {kind} call {name!r} to answer this call with"
            self._diverge(closest, "unanswerable", reason)
            raise DivergenceStop(f"replay stopped: {reason} (closest recorded step: {closest})")
        served = self._answer(recorded)
        if kind == "model" and served.error is None:
            payload = recorded.snapshots.get("model") or {}
            with self._lock:
                self._asked = [
                    (n, i, recorded.index) for n, i in calls_asked(payload.get("response"), self._code_tools)
                ]
            if self.watch is not None:
                self.watch.answered(payload.get("response"))
        return served

    # ------------------------------------------------------------------------- recorded risky tools (live)

    def _watch_call(self, kind: str, name: str, sent: str | None) -> None:
        """A live replay: count the tool steps of recorded risky tools; stop before a model call whose request
        carries the result of one that no tool step answered (it ran outside the firewall)."""
        assert self.watch is not None
        if kind == "tool":
            self.watch.tool_step(name)
        elif kind == "model":
            tool = self.watch.carried(sent)
            if tool is not None:
                self._refuse_undeclared(tool, carried=True)
                raise ApprovalRequired(self.refusal or "")

    def model_answered(self, step: Any, response: str) -> None:
        """A model call this replay executed returned ``response`` (its recorded JSON text), asked by the
        recorder: a live replay watches the risky tool calls it asks for; a whatif replay, whose tools are
        answered from the recording, checks every tool call it asks for as it does a served answer's."""
        if self.watch is not None:
            self.watch.answered_text(response)
        if self.mode is ReplayMode.WHATIF:
            try:
                answer = json.loads(response)
            except ValueError:
                return
            models = [s for s in self._all if s.kind == "model" and s.name == step.name]
            if not models:
                return
            with self._lock:
                index = models[min(max(self._models_run - 1, 0), len(models) - 1)].index
                self._asked = [(n, i, index) for n, i in calls_asked(answer, self._code_tools)]

    def _refuse_undeclared(self, tool: Any, *, carried: bool) -> None:
        reason = undeclared_refusal(tool, carried=carried)
        with self._lock:
            if tool.name not in self._undeclared:
                self._undeclared.append(tool.name)
            # a recorded call the current code made outside the firewall is not a missing call
            self.divergences[:] = [
                d for d in self.divergences if not (d.kind == "missing_call" and f"call {tool.name!r}" in d.reason)
            ]
        self._diverge(tool.step_index, "undeclared_tool", reason)
        if self.refusal is None:
            self.refusal = reason
            self.refused_call = {
                "kind": "tool",
                "name": tool.name,
                "step_index": tool.step_index,
                "risk": tool.risk,
                "approve_with": None,
            }

    def undeclared_tools(self) -> tuple[str, ...]:
        """Recorded write/high tools this live replay saw run (or asked for) outside the firewall."""
        with self._lock:
            return tuple(self._undeclared)

    # ------------------------------------------------------------------------------------ plain tool loops

    def _check_tool_results(self, kind: str, name: str, sent: str | None) -> None:
        """Tool calls of the last answered model step: a tool step answers one of the same name; a model
        request that carries the result of one no tool step answered shows that code outside the firewall
        produced it (an undecorated tool ran for real): an ``unrecorded_tool`` divergence, never ``matched``."""
        if not self._asked:
            return
        with self._lock:
            if kind == "tool":
                for i, (asked_tool, _, _) in enumerate(self._asked):
                    if asked_tool == name:
                        del self._asked[i]
                        break
                return
            if kind != "model":
                return
            asked, self._asked = self._asked, []
        self._report_unrecorded(asked, sent)

    def _report_unrecorded(self, asked: list[tuple[str, str | None, int]], sent: str | None) -> None:
        """``unrecorded_tool`` divergences for the calls in ``asked`` that no tool step answered: those whose
        result the model request ``sent`` carries (None: the run ended), and those of model-written code."""
        for tool, index in unrecorded_results(asked, sent):
            self._diverge(
                index,
                "unrecorded_tool",
                f"the model asked for tool {tool!r} at step {index} and its result went back to the "
                "model with no tool step: the tool ran outside the firewall (decorate it with "
                "@otel_replay.tool so a replay answers it from the recording)",
            )
        for tool, index in unrecorded_code_calls(asked):
            self._diverge(
                index,
                "unrecorded_tool",
                f"the code the model wrote at step {index} calls tool {tool!r}, and "
                f"{'the run ended' if sent is None else 'the next model call came'} with no tool step for it: "
                "the tool ran outside the firewall, or not at all (instrument the "
                "agent's framework, e.g. orp.instrument('smolagents'), so a replay answers it)",
            )

    def _whatif_model(self, name: str, markers: Sequence[str]) -> None:
        """A whatif replay runs its model calls for real (never with a redaction marker in the request); the
        request is not compared with the recording (a different one is expected), tools and output are."""
        with self._lock:
            nth = self._models_run
            self._models_run += 1
        if markers:
            models = [s for s in self._all if s.kind == "model" and s.name == name]
            refuse_markers(self, name, models[min(nth, len(models) - 1)] if models else None, markers)
        return None

    def _note_schema(self, recorded: Step | None, step: Any) -> None:
        """A tool whose recorded ``schema_version`` differs from the current code's (a schema change)."""
        if recorded is None:
            return
        was = recorded.attributes.get(semconv.TOOL_SCHEMA_VERSION)
        now = step.attrs.get(semconv.TOOL_SCHEMA_VERSION)
        if was != now:
            self.schema_changes.append(
                {"step_index": recorded.index, "tool": step.name, "recorded": was, "current": now}
            )

    def permits(self, step: Any) -> str | None:
        """What a call the session let execute may do under the side-effect guard (asked by the recorder):
        ``network`` for a whatif model call (its connection to the model), ``all`` for a tool the policy
        runs live (as in a live replay), else None (the guard as it is)."""
        kind = _matched_kind(step.kind.value)
        if kind == "model" and self.mode is ReplayMode.WHATIF:
            return "network"
        if kind == "tool" and self.tape is not None and step.name in self.tape.policy.tools_live:
            return "all"
        return None

    def override_request(self, shape: str, request: dict[str, Any]) -> dict[str, Any]:
        """An SDK model call's keyword arguments with the policy's model overrides applied (asked by the SDK
        instrumentors before the call is recorded and sent); unchanged without overrides."""
        if self.policy is None or not self.policy.overrides_models or self.mode is ReplayMode.DRY:
            return request
        try:
            out, notes = overrides.override_request(self.policy, shape, request)
        except Exception as exc:  # noqa: BLE001 - never into the agent: the call goes as it was, with a note
            out, notes = request, [f"the model overrides could not be applied to a {shape} call ({type(exc).__name__})"]
        self.note(*notes)
        return out

    def override_call(
        self, name: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """An ``@otel_replay.model`` function's arguments with the policy's model overrides applied."""
        if self.policy is None or not self.policy.overrides_models or self.mode is ReplayMode.DRY:
            return args, kwargs
        args, kwargs, notes = overrides.override_call(self.policy, name, func, args, kwargs)
        self.note(*notes)
        return args, kwargs

    def note(self, *notes: str) -> None:
        """Add notes for the replay's result (things to know that are not divergences), each once."""
        with self._lock:
            self.notes.extend(n for n in dict.fromkeys(notes) if n not in self.notes)

    def tape_result(self) -> dict[str, list[dict[str, Any]]] | None:
        """``ReplayResult.tape``: the four lists for a replay given a policy (empty where no tape ran), and
        ``mocked`` when it was given mocks; None without a policy."""
        if self.policy is None:
            return None
        if self.tape is None:
            return {key: [] for key in (*tape.TAPE_KEYS, *((tape.MOCKED,) if self.mocks else ()))}
        return self.tape.to_dict(mocked=bool(self.mocks))

    # --------------------------------------------------------------------------------------------- helpers

    def _before_from_step(self, recorded: Step) -> bool:
        return self.from_step is not None and recorded.index < self.from_step

    def _match(self, kind: str, name: str, key: str | None = None, sent: str | None = None) -> Step | None:
        """The recorded step this call corresponds to, by kind, name and order; skipped ones are missing.

        The search looks a bounded distance ahead: a call whose name only appears much later is an extra call
        here, not proof that every recorded call in between went missing. Calls that ran at the same time in the
        recording (:meth:`_concurrent`: parallel branches of a graph, tools run in threads, concurrent tasks)
        may come in another order in the replay: among those, the one that sends the same as this call is taken
        (``key``, ``sent``), and a skipped one concurrent with the step taken is not missing yet (a branch still
        running may make it); it is missing when the replay ends without it."""
        window = self._window()
        for pos, j in enumerate(window):
            candidate = self.recorded[j]
            if _matched_kind(candidate.kind) != kind or candidate.name != name:
                continue
            siblings = [
                k
                for k in window[pos + 1 :]
                if _matched_kind(self.recorded[k].kind) == kind
                and self.recorded[k].name == name
                and self._concurrent(self.recorded[k], candidate)
            ]
            if siblings and key is not None and not self._sends_same(candidate, kind, key, sent):
                j = next((k for k in siblings if self._sends_same(self.recorded[k], kind, key, sent)), j)
            chosen = self.recorded[j]
            for i in window:
                if i >= j:
                    break
                missing = self.recorded[i]
                if not self._concurrent(missing, chosen):  # concurrent with the step taken: not missing yet
                    self._diverge(
                        missing.index,
                        "missing_call",
                        f"the replay did not make the recorded {missing.kind} call {missing.name!r}",
                    )
                    self._consumed.add(i)
            self._consumed.add(j)
            self._advance()
            return chosen
        here = self.recorded[self.cursor].index if self.cursor < len(self.recorded) else None
        closest = self._closest(kind, name)
        where = (
            f"step {here} expected {self.recorded[self.cursor].kind} {self.recorded[self.cursor].name!r}"
            if here is not None
            else "the recording had no calls left"
        )
        nearest = f"; closest recorded {kind} {name!r} is step {closest}" if closest is not None else ""
        self._diverge(
            here if here is not None else closest,
            "extra_call",
            f"the replay made a {kind} call {name!r} the recording does not have here ({where}{nearest})",
        )
        return None

    def _path(self, step: Step) -> list[Step]:
        """``step`` and its recorded ancestors (nested agents), innermost first."""
        path = [step]
        while path[-1].parent_span_id in self._by_span and len(path) < 64:
            path.append(self._by_span[path[-1].parent_span_id])
        return path

    def _concurrent(self, a: Step, b: Step) -> bool:
        """Whether two recorded steps ran in branches that ran at the same time: below their nearest common
        ancestor, the two steps (or nested agents) that hold them overlapped in time. Two steps of one agent run
        one after the other unless their own spans overlap (tools run in threads, gathered tasks); the steps of
        two agents that ran side by side (parallel branches of a graph) are concurrent, whenever each ran. So are
        the tool calls of one model answer (:meth:`_one_batch`), however short."""
        if self._one_batch(a, b):
            return True
        path_a, path_b = self._path(a), self._path(b)
        where_b = {s.span_id: i for i, s in enumerate(path_b)}
        head_a, head_b = path_a[-1], path_b[-1]  # no common ancestor step: the run's root holds both
        for i, step in enumerate(path_a):
            j = where_b.get(step.span_id)
            if j is not None:
                if i == 0 or j == 0:  # one holds the other
                    return False
                head_a, head_b = path_a[i - 1], path_b[j - 1]
                break
        return _overlap(head_a, head_b)

    def _one_batch(self, a: Step, b: Step) -> bool:
        """Whether two recorded tool calls answer one model answer: tool or handoff steps of one agent with no
        model call of that agent between them. A framework runs the calls of one answer in an order of its own
        (LangGraph's ``ToolNode`` maps them over a thread pool, the Agents SDK gathers them), so calls too short
        to overlap in time may still come in either order."""
        if a.parent_span_id != b.parent_span_id or not {a.kind, b.kind} <= semconv.TOOL_CALL_KINDS:
            return False
        low, high = sorted((a.index, b.index))
        models = self._models.get(a.parent_span_id, [])
        after = bisect.bisect_right(models, low)
        return after == len(models) or models[after] > high

    def _window(self) -> list[int]:
        """Positions of the recorded steps not answered yet, from the cursor, as far as the look-ahead goes."""
        window: list[int] = []
        for j in range(self.cursor, len(self.recorded)):
            if j in self._consumed:
                continue
            window.append(j)
            if len(window) > _LOOKAHEAD:
                break
        return window

    def _advance(self) -> None:
        while self.cursor < len(self.recorded) and self.cursor in self._consumed:
            self.cursor += 1

    def _sends_same(self, recorded: Step, kind: str, key: str, sent: str | None) -> bool:
        attr = _HASH_ATTR.get(kind)
        return attr is not None and tape.sends_same(recorded, attr, key, sent, self.volatile_rules)

    def _closest(self, kind: str, name: str) -> int | None:
        here = self.recorded[self.cursor].index if self.cursor < len(self.recorded) else None
        same = [s.index for s in self._all if _matched_kind(s.kind) == kind and s.name == name]
        if same and here is not None:
            return min(same, key=lambda i: abs(i - here))
        if same:
            return same[-1]
        return here if here is not None else (self.recorded[-1].index if self.recorded else None)

    def _kernel_refusals(self) -> list[str]:
        """What the seccomp supervisor refused during the recorded steps, each recorded as a side effect; it
        lets every call through from now on."""
        if self.prefix_supervisor is None or not self.prefix_supervisor.confined:
            return []
        silenced: list[str] = []
        try:
            refused, silenced = self.prefix_supervisor.release()
        except OSError as exc:
            refused = [f"the recorded steps' supervisor ended ({exc}); what it refused is unknown"]
        for what in refused:
            record_refused(self, what)
        if silenced:
            self.note(
                f"the recorded steps were refused writing through {', '.join(silenced)}, opened before them: "
                "each now leads to /dev/null for the rest of this process, so what the agent still holds for it "
                "(a buffered write) is never made"
            )
        return refused

    def _leave_prefix(self) -> None:
        """The recorded steps before N are over: from here on the replay is live. When the kernel refused an
        effect of theirs, the replay stops here instead: the agent's state carries what was refused (a buffered
        write, a half-done change), which the live part would otherwise make real."""
        if self.past_recorded_prefix:
            return
        refused = self._kernel_refusals()
        check_children()  # while the guard of the recorded steps is still in force
        self.past_recorded_prefix = True
        if refused:
            stop = (
                f"replay stopped before step {self.from_step}: the kernel refused an effect of the recorded steps "
                "before it, so the live part did not start"
            )
            self.note(stop)
            raise DivergenceStop(stop)

    def _diverge(
        self,
        index: int | None,
        kind: str,
        reason: str,
        *,
        expected: str | None = None,
        actual: str | None = None,
        diff: str | None = None,
        text_diffs: tuple[TextDiff, ...] = (),
    ) -> None:
        self.divergences.append(
            Divergence(
                step_index=index,
                kind=kind,
                reason=reason,
                expected=expected,
                actual=actual,
                diff=diff,
                text_diffs=text_diffs,
            )
        )

    def _answer(self, recorded: Step) -> Served:
        self._values.answered(recorded.index)  # its code will not run: the values it drew will not be asked for
        self._inside_answered(recorded)
        return recorded_answer(recorded, self._diverge)

    def _inside_answered(self, answered: Step) -> None:
        """The recorded steps made inside ``answered`` (a tool a code agent's ``execute`` step called, a tool
        that called another): its code does not run, so they are not made, and are not missing."""
        with self._lock:
            self._consumed.update(self._nested.get(answered.span_id, ()))
            self._advance()

    def _mock(self, name: str, arguments: str | None) -> Served:
        return mock_answer(self.mocks[name], arguments)

    def _live(self, step: Any, kind: str, name: str, recorded: Step | None) -> Served | None:
        if kind == "tool":
            live_tool(self, step, name, recorded)
        return None

    def finish(self, *, completed: bool) -> None:
        """The agent returned (or stopped): recorded calls never made are missing calls; tools the last model
        answer's code called with no tool step ran outside the firewall."""
        if completed:
            with self._lock:
                asked, self._asked = self._asked, []
            self._report_unrecorded(asked, None)
            with self._lock:
                for i in range(self.cursor, len(self.recorded)):
                    if i in self._consumed:
                        continue
                    missing = self.recorded[i]
                    self._diverge(
                        missing.index,
                        "missing_call",
                        f"the replay did not make the recorded {missing.kind} call {missing.name!r}",
                    )
                self._consumed.update(range(len(self.recorded)))
                self.cursor = len(self.recorded)
        for unused in self.tape.finish() if self.tape is not None else ():
            if completed:
                self._diverge(
                    unused.index, "missing_call", f"the replay did not make the recorded tool call {unused.name!r}"
                )

    @property
    def outcome(self) -> str:
        """``refused``, ``diverged`` or ``matched``."""
        if self.refusal is not None:
            return "refused"
        return "diverged" if self.divergences else "matched"

    def close_root(self, *, span: trace.Span, exc: BaseException | None, output_text: str) -> None:
        """Called as the replay's root span ends: final checks, then the outcome on the span."""
        stop = interrupt_in(exc) if exc is not None else None  # also inside a task group's exception group
        self._kernel_refusals()  # below Python, while the recorded steps ran
        check_children()  # a process no audit event showed
        self.finish(completed=stop is None)
        if self.watch is not None and stop is None:
            marked = (getattr(span, "attributes", None) or {}).get(semconv.RUN_EXECUTES_CODE)
            for tool in self.watch.unanswered(code_firewalled=marked is True):
                self._refuse_undeclared(tool, carried=False)
        if stop is not None and not self.divergences:  # stopped without a recorded reason
            self._diverge(None, "unanswerable", str(stop))
        self.compare_output(output_text)
        for d in self.divergences:
            attrs: dict[str, str | int] = {semconv.DIVERGENCE_KIND: d.kind, semconv.DIVERGENCE_REASON: d.reason}
            if d.step_index is not None:
                attrs[semconv.DIVERGENCE_STEP] = d.step_index
            span.add_event(semconv.EVENT_DIVERGENCE, attrs)
        first = self.first_divergence
        span.set_attributes(
            {
                semconv.REPLAY_EXECUTIONS: json.dumps(self.executions(), sort_keys=True),
                semconv.REPLAY_OUTCOME: self.outcome,
                semconv.REPLAY_DIVERGED: self.outcome == "diverged",
                **(
                    {semconv.REPLAY_FIRST_DIVERGENCE: first.step_index}
                    if first is not None and first.step_index is not None
                    else {}
                ),
            }
        )

    @property
    def first_divergence(self) -> Divergence | None:
        """The divergence at the lowest original step index (the output comes last)."""
        if not self.divergences:
            return None
        return min(self.divergences, key=lambda d: (d.step_index is None, d.step_index or 0))

    def compare_output(self, payload_text: str) -> None:
        """Compare the replay's output snapshot with the original's (answer, structured output, error type). A
        run no function call bounded (an MCP session's, the proxy's) recorded no output of its own: not compared,
        said once."""
        boundary = self.original.attributes.get(semconv.RUN_BOUNDARY)
        if boundary:
            what = "an MCP session's" if boundary == "mcp_session" else "recorded at the model wire"
            self.note(
                f"the original run was {what} (no function call bounded it, so it recorded no output): the "
                "replay's calls were compared, its output was not"
            )
            return
        original = self.original.snapshots.get("output") or {}
        try:
            import json

            replayed = json.loads(payload_text)
        except ValueError:
            return
        for field in ("answer", "structured"):
            if not volatile.same(original.get(field), replayed.get(field), rules=self.volatile_rules):
                self._diverge(None, "output", f"the run's {field} differs from the original")
                return
        error_a = (original.get("error") or {}).get("type")
        error_b = (replayed.get("error") or {}).get("type")
        if error_a != error_b:
            self._diverge(
                None, "output", f"the run ended with {error_b or 'no error'} instead of {error_a or 'no error'}"
            )
