"""The tool tape of a replay given a :class:`~otel_replay.replay.matching.policy.ReplayPolicy` (a lab's replay).

Without a policy a tool call is matched like every other call, by kind, name and order
(:meth:`ReplaySession._match`). With one, in ``mock``, ``deterministic`` and ``whatif`` replays, tool calls are
answered from the recording's tool calls as a tape instead, per ``policy.tool_match``:

* ``strict``: the first recorded call of that tool, not taken yet, whose arguments are canonically equal
  (keyed hashes recomputed, volatile ids put aside, as :mod:`~otel_replay.replay.matching.sentdiff` compares them);
  none: the call is refused (a ``refused`` entry and a divergence) and the agent gets
  :class:`~otel_replay.errors.ToolNotRecorded`, an ordinary exception it may handle;
* ``sequence``: that tool's recorded calls in order whatever the arguments; differing arguments are a
  ``drift`` entry carrying the unified arguments diff (and an ``arguments`` divergence); a call past the
  recorded ones is refused as above.

Recorded calls never taken are ``unused`` entries when the replay ends (and ``missing_call`` divergences when
the agent ran to its end). A tool the person replaying gave a mock for (``mocks=``) is answered by that mock, not
the tape (:func:`mock_tool`): each call takes the recorded call it stands in for (so that one is not ``unused``)
and is a ``mocked`` entry. Tools named in ``policy.tools_live`` execute (a ``write``/``high`` one only with an
approval, as in a live replay) and take their recorded call in order. ``policy.faults`` replace an answer
taken from the tape for a fraction of calls (:func:`draws`): deterministic from the seed, the original trace
id, the tool, the call's ordinal for that tool and the rule's position; never global random state or time.

It must never run a tool it answered, guess an answer the tape does not hold, restore a redacted value, or
draw a fault from anything but its inputs.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Sequence
from typing import Any, Final

from ... import semconv
from ...errors import ToolNotRecorded
from ...recording import Served
from ...runs import Step
from ...semconv import ReplayMode
from ..volatile import VolatileRule
from .divergence import TextDiff
from .hashing import same_content, step_text
from .policy import ReplayPolicy, ToolFault
from .sentdiff import same_but_volatile, sent_diff

TAPE_MODES: Final = frozenset({ReplayMode.MOCK, ReplayMode.DETERMINISTIC, ReplayMode.WHATIF})
"""Modes in which a policy's tape answers tool calls (dry runs no code, live calls every tool)."""

TAPE_KEYS: Final = ("unused", "drift", "refused", "injected")
"""The keys of ``ReplayResult.tape`` (always all four for a policy replay)."""

MOCKED: Final = "mocked"
"""The key of ``ReplayResult.tape`` listing tool calls answered by the replay's ``mocks=``: present (besides
:data:`TAPE_KEYS`) when the replay was given mocks."""

_ARGS: Final = semconv.TOOL_ARGS_HASH


def sends_same(
    recorded: Step, attribute: str, key: str | None, sent: str | None, rules: tuple[VolatileRule, ...]
) -> bool:
    """Whether a call hashed ``key`` sending ``sent`` (JSON) sends what step ``recorded`` sent: equal keyed
    hashes, the recorded text hashed again with the key in force, or equal once volatile ids are put aside.
    A call or step without a hash is taken as the same (nothing to compare, as the classic matcher does)."""
    recorded_key = recorded.attributes.get(attribute, "")
    if key is None or not recorded_key or recorded_key == key:
        return True
    if same_content(recorded_key, key, text_a=step_text(recorded, attribute)):
        return True
    return same_but_volatile(recorded, attribute, sent, rules)


def draws(fault: ToolFault, *, seed: int, trace_id: str, tool: str, ordinal: int, rule: int) -> bool:
    """Whether ``fault`` fires at the ``ordinal``-th call (0-based) of ``tool`` in a replay of ``trace_id``:
    a sha256 of the inputs read as a number in [0, 1), compared with ``fault.p``. The same inputs always
    draw the same way."""
    if fault.p >= 1:
        return True
    if fault.p <= 0:
        return False
    digest = hashlib.sha256(f"{seed}\x1f{trace_id}\x1f{tool}\x1f{ordinal}\x1f{rule}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fault.p


def empty_like(value: Any) -> Any:
    """An empty value of ``value``'s type: ``{}``, ``[]``, ``()``, ``""``, ``b""``, else None."""
    for kind in (dict, list, tuple, str, bytes):
        if isinstance(value, kind):
            return kind()
    return None


def injected(fault: ToolFault, served: Served, tool: str) -> Served:
    """The answer ``fault`` puts in place of ``served`` (the recorded one)."""
    if fault.kind == "timeout":
        return Served(how="injected", error=TimeoutError(f"injected fault: tool {tool!r} timed out (replay lab)"))
    if fault.kind == "exception":
        return Served(how="injected", error=RuntimeError(f"injected fault: tool {tool!r} failed (replay lab)"))
    if fault.kind == "empty":
        return Served(how="injected", value=empty_like(served.value if served.error is None else None))
    return Served(how="injected", value=copy.deepcopy(fault.value))


class ToolTape:
    """The recorded tool calls of one run, taken by a policy replay's tool calls; the four lists of entries."""

    def __init__(
        self, steps: Sequence[Step], *, policy: ReplayPolicy, trace_id: str, rules: tuple[VolatileRule, ...]
    ) -> None:
        self.policy = policy
        self.trace_id = trace_id
        self.rules = rules
        self._calls: dict[str, list[Step]] = {}
        for step in steps:
            if step.kind in semconv.TOOL_CALL_KINDS:
                self._calls.setdefault(step.name, []).append(step)
        self._taken: set[int] = set()
        self._faulted: set[int] = set()
        """Recorded calls a raised fault answered: given back for a retry, never ``unused``."""
        self._ordinals: dict[str, int] = {}
        self._lock = threading.Lock()
        self.drift: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.injected: list[dict[str, Any]] = []
        self.mocked: list[dict[str, Any]] = []
        """Tool calls the replay's ``mocks=`` answered (listed when the replay was given mocks)."""
        self.unused: list[dict[str, Any]] | None = None
        """Filled when the replay ends (:meth:`finish`)."""

    # ---------------------------------------------------------------------------------------- taking

    def ordinal(self, tool: str) -> int:
        """The position (0-based) of this call among the replay's calls of ``tool``."""
        with self._lock:
            n = self._ordinals.get(tool, 0)
            self._ordinals[tool] = n + 1
        return n

    def next_of(self, tool: str) -> Step | None:
        """Take the first recorded call of ``tool`` not taken yet (in order), or None."""
        with self._lock:
            for step in self._calls.get(tool, ()):
                if step.index not in self._taken:
                    self._taken.add(step.index)
                    return step
        return None

    def strict_of(self, tool: str, key: str | None, sent: str | None) -> Step | None:
        """Take the first recorded call of ``tool`` not taken yet whose arguments equal the call's, or None."""
        with self._lock:
            for step in self._calls.get(tool, ()):
                if step.index not in self._taken and sends_same(step, _ARGS, key, sent, self.rules):
                    self._taken.add(step.index)
                    return step
        return None

    def give_back(self, step: Step) -> None:
        """Put back a recorded call whose answer a raised fault replaced: the service "failed" that attempt,
        so the agent's retry of the same call gets the recorded answer; left untaken, it is not ``unused``."""
        with self._lock:
            self._taken.discard(step.index)
            self._faulted.add(step.index)

    def closest(self, tool: str) -> Step | None:
        """The recorded call of ``tool`` a refused call is reported at: the first not taken, else the last."""
        with self._lock:
            calls = self._calls.get(tool, [])
            return next((s for s in calls if s.index not in self._taken), calls[-1] if calls else None)

    def fault_for(self, tool: str, ordinal: int) -> ToolFault | None:
        """The first fault rule of ``tool`` that fires at this call, or None."""
        for rule, fault in enumerate(self.policy.faults):
            if fault.tool == tool and draws(
                fault, seed=self.policy.seed, trace_id=self.trace_id, tool=tool, ordinal=ordinal, rule=rule
            ):
                return fault
        return None

    # ---------------------------------------------------------------------------------------- ending

    def finish(self) -> list[Step]:
        """The recorded calls never taken (listed once as ``unused`` entries), in step order."""
        with self._lock:
            left = sorted(
                (
                    s
                    for calls in self._calls.values()
                    for s in calls
                    if s.index not in self._taken and s.index not in self._faulted
                ),
                key=lambda s: s.index,
            )
            if self.unused is None:
                self.unused = [{"tool": s.name, "step_index": s.index} for s in left]
        return left

    def to_dict(self, *, mocked: bool = False) -> dict[str, list[dict[str, Any]]]:
        """``ReplayResult.tape``: ``unused``, ``drift``, ``refused``, ``injected`` (JSON-ready), and ``mocked``
        when ``mocked`` (the replay was given mocks)."""
        if self.unused is None:
            self.finish()
        return {
            "unused": list(self.unused or []),
            "drift": list(self.drift),
            "refused": list(self.refused),
            "injected": list(self.injected),
            **({MOCKED: list(self.mocked)} if mocked else {}),
        }


def answer_tool(session: Any, tape: ToolTape, step: Any, key: str | None, sent: str | None) -> Served | None:
    """How a policy replay answers one tool call (``session`` is the :class:`ReplaySession`): a live tool
    executes (None, after its approval is taken), else the tape's answer (or an injected fault), else a
    :class:`~otel_replay.errors.ToolNotRecorded` the agent receives."""
    name = step.name
    ordinal = tape.ordinal(name)
    policy = tape.policy
    if name in policy.tools_live:
        recorded = tape.next_of(name)
        session._note_schema(recorded, step)
        live: Served | None = session._live(step, "tool", name, recorded)
        return live
    if policy.tool_match == "sequence":
        recorded = tape.next_of(name)
        if recorded is not None and not sends_same(recorded, _ARGS, key, sent, tape.rules):
            diff, texts = sent_diff(recorded, _ARGS, sent, tape.rules)
            tape.drift.append({"tool": name, "step_index": recorded.index, "diff": diff})
            session._diverge(
                recorded.index,
                "arguments",
                f"tool {name!r} was called with different arguments than step {recorded.index} "
                "(served in sequence: argument drift)",
                diff=diff,
                text_diffs=texts,
            )
    else:
        recorded = tape.strict_of(name, key, sent)
    if recorded is None:
        return _refuse(session, tape, name, sent)
    session._note_schema(recorded, step)
    served: Served = session._answer(recorded)
    fault = tape.fault_for(name, ordinal)
    if fault is None:
        return served
    tape.injected.append({"tool": name, "step_index": recorded.index, "fault": fault.kind, "ordinal": ordinal})
    if fault.kind in ("timeout", "exception"):
        tape.give_back(recorded)  # the attempt failed: a retry gets the recorded answer
    return injected(fault, served, name)


def mock_tool(
    session: Any, tape: ToolTape, step: Any, key: str | None, sent: str | None, arguments: str | None
) -> Served:
    """How a policy replay answers a tool call the person replaying gave a mock for (``mocks=``, their explicit
    choice, so it wins over the tape and over ``tools_live``; no fault applies to it): the mock answers, and the
    call takes the recorded call of that tool it stands in for (strict: the first not taken with equal
    arguments, else the first not taken; sequence: the first not taken), which is then not ``unused``.
    Differing arguments are an ``arguments`` divergence (answered anyway, as in a mock replay); a call the
    recording has no call of that tool left for is an ``extra_call``. Either way a ``mocked`` entry."""
    name = step.name
    ordinal = tape.ordinal(name)
    recorded = None if tape.policy.tool_match == "sequence" else tape.strict_of(name, key, sent)
    if recorded is None:
        recorded = tape.next_of(name)
    if recorded is None:
        index = session._closest("tool", name)
        session._diverge(
            index,
            "extra_call",
            f"tool {name!r} was answered by its mock: the recording has no call of that tool left for this call",
        )
    else:
        index = recorded.index
        session._note_schema(recorded, step)
        if not sends_same(recorded, _ARGS, key, sent, tape.rules):
            diff, texts = sent_diff(recorded, _ARGS, sent, tape.rules)
            session._diverge(
                index,
                "arguments",
                f"tool {name!r} was called with different arguments than step {index} (answered by its mock)",
                diff=diff,
                text_diffs=texts,
            )
    tape.mocked.append({"tool": name, "step_index": index, "ordinal": ordinal})
    served: Served = session._mock(name, arguments)
    return served


def _refuse(session: Any, tape: ToolTape, name: str, sent: str | None) -> Served:
    texts: tuple[TextDiff, ...]
    closest = tape.closest(name)
    if closest is None:
        reason = f"the recording has no call of tool {name!r} to answer this call with"
        kind, (diff, texts), index = "extra_call", (None, ()), session._closest("tool", name)
    elif tape.policy.tool_match == "sequence":
        reason = f"every recorded call of tool {name!r} was answered already"
        kind, (diff, texts), index = "extra_call", (None, ()), closest.index
    else:
        reason = (
            f"no recorded call of tool {name!r} left has these arguments (closest: step {closest.index}; "
            "tool_match=strict)"
        )
        kind, (diff, texts), index = "arguments", sent_diff(closest, _ARGS, sent, tape.rules), closest.index
    tape.refused.append({"tool": name, "step_index": index, "reason": reason})
    session._diverge(index, kind, f"refused: {reason}", diff=diff, text_diffs=texts)
    return Served(how="refused", error=ToolNotRecorded(f"{reason}: not executed"))
