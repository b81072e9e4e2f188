"""The calls a replay refuses before they run: a ``write``/``high`` tool without an approval given for this
replay, a live model call that would send a redaction marker.

:func:`live_tool` takes one approval from the replay's budget for each real execution of a ``write``/``high``
tool (the higher of its recorded and its current risk; an unknown risk counts as ``high``) or stops the
replay with :class:`ApprovalRequired`, naming the exact ``--approve`` flag that allows it;
:func:`refuse_markers` stops a model call whose request carries a redaction marker (:class:`MarkerRefused`).
Both keep the refusal on the session (``refusal``, ``refused_call``, an ``approval`` / ``redacted``
divergence). It must never let a write/high tool through without taking an approval, nor count an approval
recorded in the original.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any, Final

from ... import semconv
from ...recording import ReplayInterrupt
from ...risk import step_risk


class ApprovalRequired(ReplayInterrupt):
    """A live replay reached a write/high tool without an approval given for this replay."""


class MarkerRefused(ApprovalRequired):
    """A live replay would send a redaction marker to a model: refused before the call, like a missing
    approval (the outcome is ``refused``)."""


_RISK_ORDER: Final = {"read": 0, "write": 1, "high": 2}


def higher_risk(*risks: str | None) -> str:
    """The highest of ``risks`` (read < write < high); an unknown or missing risk counts as ``high``."""
    return max(((r if r in _RISK_ORDER else "high") for r in risks), key=_RISK_ORDER.__getitem__, default="high")


def recorded_risks(session: Any, name: str, recorded: Any) -> list[str | None]:
    """The risk the recording gives tool ``name``: its matched step's, else every same-named tool or handoff
    step's (a handoff that declared none routes: ``read``)."""
    if recorded is not None:
        return [step_risk(recorded.kind, recorded.attributes.get(semconv.TOOL_RISK))]
    return [
        step_risk(s.kind, s.attributes.get(semconv.TOOL_RISK))
        for s in session.original.steps
        if s.kind in semconv.TOOL_CALL_KINDS and s.name == name
    ]


def live_tool(session: Any, step: Any, name: str, recorded: Any) -> None:
    """A tool about to execute for real: a write/high one takes one approval or the replay stops."""
    # From the step itself, not its span: a sampled-out span has no attributes; unknown means high.
    # The recording's risk counts too: current code (or --app) can never lower a recorded high to read.
    risk = higher_risk(
        step_risk(step.kind.value, step.attrs.get(semconv.TOOL_RISK)), *recorded_risks(session, name, recorded)
    )
    if risk in ("write", "high"):
        budget = session.approval_budget
        denied = budget.take(name)
        if denied is not None:
            index = recorded.index if recorded is not None else session._closest("tool", name)
            if denied == "used up":
                limit = budget.limit(name)
                flag = f"--approve {shlex.quote(f'{name}:{(limit or 0) + 1}')}"
                session.refusal = (
                    f"tool {name!r} has risk {risk} and its approval for this replay is used up "
                    f"({limit} execution{'s' if limit != 1 else ''} approved): pass {flag} "
                    f"(or {name}:*) to let the live replay execute it again"
                )
            else:
                flag = f"--approve {shlex.quote(name)}"
                session.refusal = (
                    f"tool {name!r} has risk {risk} and no approval was given for this replay: "
                    f"add {flag} to let the live replay execute it"
                )
            session.refused_call = {
                "kind": "tool",
                "name": name,
                "step_index": index,
                "risk": risk,
                "approve_with": flag,
            }
            session._diverge(index, "approval", session.refusal)
            raise ApprovalRequired(session.refusal)
        with session._lock:
            session.approved_runs[name] = session.approved_runs.get(name, 0) + 1
    session.executed.append((name, risk))


def refuse_markers(session: Any, name: str, recorded: Any, paths: Sequence[str]) -> None:
    """Stop a model call whose request would carry a redaction marker (never sent to a model)."""
    index = recorded.index if recorded is not None else session._closest("model", name)
    where = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    session.refusal = (
        f"model {name!r} would be sent a redaction marker at {where}: the recording holds no secret "
        "there, and a live replay never sends a marker to a model; have the agent take the value "
        "from the current environment, or replay in mock or deterministic mode"
    )
    session.refused_call = {"kind": "model", "name": name, "step_index": index, "risk": None, "approve_with": None}
    session._diverge(index, "redacted", session.refusal)
    raise MarkerRefused(session.refusal)
