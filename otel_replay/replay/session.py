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

import json
import shlex
import threading
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, TraceFlags

from .. import semconv
from ..recording import DivergenceStop, ReplayInterrupt, Served
from ..runs import Run, Step
from ..semconv import ReplayMode
from . import volatile
from .approvals import Approvals, executions_of
from .hashing import same_content, step_text
from .policy import ReplayPolicy
from .reviving import RecordedError as RecordedError  # re-exported: otel_replay.replay.session.RecordedError
from .reviving import revive as revive  # re-exported: otel_replay.replay.session.revive
from .reviving import revive_exception as revive_exception  # re-exported
from .sentdiff import _same_but_volatile, _sent_diff
from .toolcalls import requested_calls, result_ids


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """One place where the replay did not follow the original."""

    step_index: int | None
    """Index of the original step it is reported at (the closest recorded step), or None."""
    kind: str
    """``arguments``, ``request``, ``extra_call``, ``missing_call``, ``unanswerable``, ``output``, ``approval``,
    ``side_effect`` (an operation the side-effect guard blocked, see :mod:`otel_replay.replay.guard`),
    ``unrecorded_tool`` (a tool call the model asked for was answered by code outside the firewall, see
    :mod:`otel_replay.replay.toolcalls`), ``redacted`` (a live model call would have sent a redaction marker)."""
    reason: str
    expected: str | None = None
    actual: str | None = None
    diff: str | None = None
    """For ``request`` and ``arguments`` divergences: a unified diff of what the step sent in the recording
    (``---``) and in the replay (``+++``), as indented JSON; redacted parts show as their markers."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "step_index": self.step_index,
            "kind": self.kind,
            "reason": self.reason,
            "expected": self.expected,
            "actual": self.actual,
            "diff": self.diff,
        }


class ApprovalRequired(ReplayInterrupt):
    """A live replay reached a write/high tool without an approval given for this replay."""


class MarkerRefused(ApprovalRequired):
    """A live replay would send a redaction marker to a model: refused before the call, like a missing
    approval (the outcome is ``refused``)."""


def _captured(payload: Mapping[str, Any]) -> bool:
    """False when a snapshot says its content was not captured (runs read from other instrumentations)."""
    return all(payload.get(flag) is not False for flag in ("content_captured", "response_captured", "result_captured"))


_LOOKAHEAD = 8
"""How many recorded steps ahead a call may match before it counts as an extra call."""

_ANSWER_KEY = {"tool": ("tool", "result"), "model": ("model", "response"), "retrieval": ("retrieval", "returned")}
_HASH_ATTR = {
    "tool": semconv.TOOL_ARGS_HASH,
    "model": semconv.MODEL_REQUEST_HASH,
    "retrieval": semconv.RETRIEVAL_ARGS_HASH,
}


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
        self.recorded: list[Step] = [s for s in original.steps if s.kind != semconv.StepKind.AGENT.value]
        self.cursor = 0
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
        # Non-deterministic values in the order they were drawn (seq), with the step they were drawn in, so
        # the values of a step answered from the recording (its code does not run again) can be dropped.
        step_of_span = {s.span_id: s.index for s in original.steps}
        drawn: list[tuple[int, str, str | None, int | None]] = []
        for span in original.spans:
            for event in span.events:
                if event.name == semconv.EVENT_VALUE:
                    a = event.attributes
                    seq = int(a.get(semconv.SNAPSHOT_SEQ) or 0)
                    drawn.append(
                        (
                            seq,
                            a.get(semconv.VALUE_KIND, ""),
                            a.get(semconv.VALUE_PAYLOAD),
                            step_of_span.get(span.span_id),
                        )
                    )
        # One queue per kind, in seq order; values of steps answered from the recording are skipped lazily.
        self._values: dict[str, deque[tuple[int, str, str | None, int | None]]] = {}
        for value in sorted(drawn, key=lambda v: v[0]):
            self._values.setdefault(value[1], deque()).append(value)
        self._valued_steps = {v[3] for v in drawn if v[3] is not None}
        self._answered_steps: set[int] = set()
        # Tool calls asked for by the last model answer served from the recording, not yet answered by a tool
        # step of this replay: (name, call id, recorded model step).
        self._asked: list[tuple[str, str | None, int]] = []

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
            semconv.REPLAY_LAB_ID: self.policy.lab_id if self.policy is not None else None,
            semconv.REPLAY_LAB_LANE: self.policy.lane if self.policy is not None else None,
        }

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
            from .journal import root_mac

            try:  # never into the agent: a row without a MAC is marked by the audit
                span.set_attribute(semconv.REPLAY_AUDIT_MAC, root_mac(self))
            except Exception:  # noqa: BLE001
                pass

    def next_value(self, kind: str) -> tuple[Any] | None:
        """The next recorded non-deterministic value of ``kind``, unless this replay draws fresh ones."""
        if self.mode is ReplayMode.LIVE and self.from_step is None:
            return None
        with self._lock:
            queue = self._values.get(kind)
            while queue and queue[0][3] in self._answered_steps:
                queue.popleft()
            if not queue:
                return None
            raw = queue.popleft()[2]
        if raw is None:
            return None
        try:
            import json

            return (revive(json.loads(raw)),)
        except (TypeError, ValueError):
            return None

    def intercept(
        self, *, step: Any, key: str | None, arguments: str | None, sent: str | None = None, markers: Sequence[str] = ()
    ) -> Served | None:
        """Decide how one step call is answered: a :class:`Served` answer, None to execute, or raise.

        ``key`` is the call's hash, ``arguments`` its arguments as JSON (for a mock), ``sent`` what it sends as
        JSON (a model's request, else its arguments), shown as a diff when it differs from the recording.
        ``markers``: paths of the redaction markers a live model call would really send (it is refused)."""
        kind = step.kind.value
        name = step.name
        self._check_tool_results(kind, name, sent)
        with self._lock:
            recorded = self._match(kind, name)
        if recorded is not None and kind == "tool":
            was = recorded.attributes.get(semconv.TOOL_SCHEMA_VERSION)
            now = step.attrs.get(semconv.TOOL_SCHEMA_VERSION)
            if was != now:
                self.schema_changes.append(
                    {"step_index": recorded.index, "tool": name, "recorded": was, "current": now}
                )
        if recorded is not None:
            recorded_key = recorded.attributes.get(_HASH_ATTR.get(kind, ""), "")
            if (
                key is not None
                and recorded_key
                and recorded_key != key  # equal hashes agree: the stored text is only rebuilt when they differ
                and not same_content(recorded_key, key, text_a=step_text(recorded, _HASH_ATTR[kind]))
                and not _same_but_volatile(recorded, _HASH_ATTR[kind], sent, self.volatile_rules)
            ):
                what = "request" if kind == "model" else "arguments"
                self._diverge(
                    recorded.index,
                    what,
                    f"{kind} {name!r} was called with different {what} than step {recorded.index}",
                    expected=recorded_key,
                    actual=key,
                    diff=_sent_diff(recorded, _HASH_ATTR[kind], sent, self.volatile_rules),
                )
                if self.mode is ReplayMode.DETERMINISTIC and not self._before_from_step(recorded):
                    raise DivergenceStop(
                        f"deterministic replay stopped at step {recorded.index}: {kind} {name!r} "
                        f"{what} differ from the recording"
                    )
        from_recording = recorded is not None and self._before_from_step(recorded)
        if self.mode is ReplayMode.LIVE and not from_recording:
            if kind == "model" and markers:
                self._refuse_markers(name, recorded, markers)
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
                self._asked = [(n, i, recorded.index) for n, i in requested_calls(payload.get("response"))]
        return served

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
        if sent is None:
            return
        try:
            returned = result_ids(json.loads(sent))
        except ValueError:
            return
        reported: set[str] = set()
        for tool, call_id, index in asked:
            if call_id is not None and call_id in returned and tool not in reported:
                reported.add(tool)
                self._diverge(
                    index,
                    "unrecorded_tool",
                    f"the model asked for tool {tool!r} at step {index} and its result went back to the "
                    "model with no tool step: the tool ran outside the firewall (decorate it with "
                    "@otel_replay.tool so a replay answers it from the recording)",
                )

    def _refuse_markers(self, name: str, recorded: Step | None, paths: Sequence[str]) -> None:
        """Stop a live model call whose request would carry a redaction marker (never sent to a model)."""
        index = recorded.index if recorded is not None else self._closest("model", name)
        where = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        self.refusal = (
            f"model {name!r} would be sent a redaction marker at {where}: the recording holds no secret "
            "there, and a live replay never sends a marker to a model; have the agent take the value "
            "from the current environment, or replay in mock or deterministic mode"
        )
        self.refused_call = {"kind": "model", "name": name, "step_index": index, "risk": None, "approve_with": None}
        self._diverge(index, "redacted", self.refusal)
        raise MarkerRefused(self.refusal)

    # --------------------------------------------------------------------------------------------- helpers

    def _before_from_step(self, recorded: Step) -> bool:
        return self.from_step is not None and recorded.index < self.from_step

    def _match(self, kind: str, name: str) -> Step | None:
        """The recorded step this call corresponds to, by kind, name and order; skipped ones are missing.

        The search looks a bounded distance ahead: a call whose name only appears much later is an extra call
        here, not proof that every recorded call in between went missing."""
        for j in range(self.cursor, min(len(self.recorded), self.cursor + _LOOKAHEAD + 1)):
            candidate = self.recorded[j]
            if candidate.kind == kind and candidate.name == name:
                for missing in self.recorded[self.cursor : j]:
                    self._diverge(
                        missing.index,
                        "missing_call",
                        f"the replay did not make the recorded {missing.kind} call {missing.name!r}",
                    )
                self.cursor = j + 1
                return candidate
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

    def _closest(self, kind: str, name: str) -> int | None:
        here = self.recorded[self.cursor].index if self.cursor < len(self.recorded) else None
        same = [s.index for s in self.recorded if s.kind == kind and s.name == name]
        if same and here is not None:
            return min(same, key=lambda i: abs(i - here))
        if same:
            return same[-1]
        return here if here is not None else (self.recorded[-1].index if self.recorded else None)

    def _diverge(
        self,
        index: int | None,
        kind: str,
        reason: str,
        *,
        expected: str | None = None,
        actual: str | None = None,
        diff: str | None = None,
    ) -> None:
        self.divergences.append(
            Divergence(step_index=index, kind=kind, reason=reason, expected=expected, actual=actual, diff=diff)
        )

    def _answer(self, recorded: Step) -> Served:
        if recorded.index in self._valued_steps:
            with self._lock:  # the step's own code will not run: the values it drew will not be asked for
                self._answered_steps.add(recorded.index)
        snapshot_kind, field = _ANSWER_KEY[recorded.kind]
        payload = recorded.snapshots.get(snapshot_kind)
        damaged = [s for s in recorded.snapshot_list if s.kind == snapshot_kind and (s.truncated or not s.intact)]
        if isinstance(payload, dict) and not _captured(payload):
            reason = (
                f"step {recorded.index} was recorded by another instrumentation without its content: the "
                "recording cannot answer this call"
            )
            self._diverge(recorded.index, "unanswerable", reason)
            raise DivergenceStop(f"replay stopped: {reason} (pass a mock for it, or replay live)")
        if damaged:
            reason = (
                f"step {recorded.index}'s {snapshot_kind} snapshot was "
                f"{'truncated at the size cap' if damaged[0].truncated else 'damaged'}: the recording cannot "
                "answer this call"
            )
            self._diverge(recorded.index, "unanswerable", reason)
            raise DivergenceStop(
                f"replay stopped: {reason} (raise OTEL_REPLAY_SNAPSHOT_MAX_BYTES when recording, or pass a mock for it)"
            )
        if recorded.status == "error" or not isinstance(payload, dict):
            if recorded.status != "error":
                raise DivergenceStop(
                    f"replay stopped: step {recorded.index} has no readable {snapshot_kind} snapshot to answer from"
                )
            error = recorded.error or (payload or {}).get("error")
            return Served(how="recording", error=revive_exception(error))
        return Served(how="recording", value=revive(payload.get(field)))

    def _mock(self, name: str, arguments: str | None) -> Served:
        mock = self.mocks[name]
        if callable(mock):
            import json

            args = revive(json.loads(arguments)) if arguments else {}
            try:
                return Served(how="mock", value=mock(**args) if isinstance(args, dict) else mock(args))
            except Exception as exc:  # noqa: BLE001 - the mock's exception is the call's exception
                return Served(how="mock", error=exc)
        return Served(how="mock", value=mock)

    def _live(self, step: Any, kind: str, name: str, recorded: Step | None) -> Served | None:
        if kind != "tool":
            return None
        # From the step itself, not its span: a sampled-out span has no attributes; unknown means high.
        # The recording's risk counts too: current code (or --app) can never lower a recorded high to read.
        risk = higher_risk(step.attrs.get(semconv.TOOL_RISK), *self._recorded_risks(name, recorded))
        if risk in ("write", "high"):
            denied = self.approval_budget.take(name)
            if denied is not None:
                index = recorded.index if recorded is not None else self._closest(kind, name)
                if denied == "used up":
                    limit = self.approval_budget.limit(name)
                    flag = f"--approve {shlex.quote(f'{name}:{(limit or 0) + 1}')}"
                    self.refusal = (
                        f"tool {name!r} has risk {risk} and its approval for this replay is used up "
                        f"({limit} execution{'s' if limit != 1 else ''} approved): pass {flag} "
                        f"(or {name}:*) to let the live replay execute it again"
                    )
                else:
                    flag = f"--approve {shlex.quote(name)}"
                    self.refusal = (
                        f"tool {name!r} has risk {risk} and no approval was given for this replay: "
                        f"add {flag} to let the live replay execute it"
                    )
                self.refused_call = {
                    "kind": "tool",
                    "name": name,
                    "step_index": index,
                    "risk": risk,
                    "approve_with": flag,
                }
                self._diverge(index, "approval", self.refusal)
                raise ApprovalRequired(self.refusal)
            with self._lock:
                self.approved_runs[name] = self.approved_runs.get(name, 0) + 1
        self.executed.append((name, risk))
        return None

    def _recorded_risks(self, name: str, recorded: Step | None) -> list[str | None]:
        """The risk the recording gives tool ``name``: its matched step's, else every same-named tool step's."""
        if recorded is not None:
            return [recorded.attributes.get(semconv.TOOL_RISK)]
        return [s.attributes.get(semconv.TOOL_RISK) for s in self.recorded if s.kind == "tool" and s.name == name]

    def finish(self, *, completed: bool) -> None:
        """The agent returned (or stopped): recorded calls never made are missing calls."""
        if completed:
            with self._lock:
                for missing in self.recorded[self.cursor :]:
                    self._diverge(
                        missing.index,
                        "missing_call",
                        f"the replay did not make the recorded {missing.kind} call {missing.name!r}",
                    )
                self.cursor = len(self.recorded)

    @property
    def outcome(self) -> str:
        """``refused``, ``diverged`` or ``matched``."""
        if self.refusal is not None:
            return "refused"
        return "diverged" if self.divergences else "matched"

    def close_root(self, *, span: trace.Span, exc: BaseException | None, output_text: str) -> None:
        """Called as the replay's root span ends: final checks, then the outcome on the span."""
        self.finish(completed=not isinstance(exc, ReplayInterrupt))
        if isinstance(exc, ReplayInterrupt) and not self.divergences:  # stopped without a recorded reason
            self._diverge(None, "unanswerable", str(exc))
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
        """Compare the replay's output snapshot with the original's (answer, structured output, error type)."""
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


_RISK_ORDER: Final = {"read": 0, "write": 1, "high": 2}


def higher_risk(*risks: str | None) -> str:
    """The highest of ``risks`` (read < write < high); an unknown or missing risk counts as ``high``."""
    return max(((r if r in _RISK_ORDER else "high") for r in risks), key=_RISK_ORDER.__getitem__, default="high")


def os_user() -> str:
    """The operating-system user running this process, by its user id (never from ``--actor`` or ``$USER``)."""
    import getpass
    import os

    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except Exception:  # noqa: BLE001 - no user database (containers), or not POSIX
        pass
    if hasattr(os, "getuid"):
        return f"uid-{os.getuid()}"
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001
        return "unknown"


def callable_mocks(mocks: Mapping[str, Callable[..., Any] | Any] | None) -> dict[str, Any]:
    """Validate ``mocks=``: a mapping of step name to a value or a callable taking the call's arguments."""
    if mocks is None:
        return {}
    if not isinstance(mocks, Mapping):
        raise TypeError("mocks must be a mapping of step name to a value or a callable")
    return dict(mocks)
