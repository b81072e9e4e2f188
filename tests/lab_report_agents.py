"""Agents and scorers the lab report tests replay and run, importable as ``lab_report_agents:NAME``.

Each agent is a changed version of the demo's support agent (``otel_replay.demo.agent``), recorded under the
same agent name so a replay of a demo run can run it: a new system prompt, an answer that differs on every call
(a flaky candidate), and an agent whose names are hostile text for the report's escaping.
"""

from __future__ import annotations

import itertools
from typing import Any

import otel_replay as orp
from otel_replay.demo import agent as demo
from otel_replay.lab.scoring import scorer
from otel_replay.runs import Run

NEW_RULES = "You are a terse support agent. Answer in one line. Never refund."

HOSTILE_AGENT = "evil\x1b]0;pwned\x07agent[bold red]<script>alert(1)</script>"
HOSTILE_TOOL = "tool\x1b[2J<img src=x onerror=alert(2)>"

_calls = itertools.count(1)


@orp.agent("support-agent", config=demo.CONFIG)
def support_agent_new_prompt(question: str, *, customer: str = "anonymous", receipt: bytes | None = None) -> Any:
    """The demo agent with another system prompt: every model request differs from the recording."""
    saved = demo.SYSTEM_RULES
    demo.SYSTEM_RULES = NEW_RULES
    try:
        return demo.support(question, customer=customer, receipt=receipt, fixed=False)
    finally:
        demo.SYSTEM_RULES = saved


@orp.agent("support-agent", config=demo.CONFIG)
def support_agent_guarded(question: str, *, customer: str = "anonymous", receipt: bytes | None = None) -> Any:
    """The demo agent that answers instead of failing when an order is unknown (same calls, another ending)."""
    try:
        return demo.support(question, customer=customer, receipt=receipt, fixed=False)
    except KeyError as exc:
        return {"answer": f"I cannot find order {exc}.", "citations": []}


@orp.agent("support-agent", config=demo.CONFIG)
def support_agent_noisy(question: str, *, customer: str = "anonymous", receipt: bytes | None = None) -> Any:
    """The demo agent whose answer carries a counter: no two calls end the same way (a flaky run)."""
    out = demo.support(question, customer=customer, receipt=receipt, fixed=False)
    return {**out, "answer": f"{out['answer']} (#{next(_calls)})"}


@orp.tool(HOSTILE_TOOL, risk="read")
def hostile_tool(x: int) -> int:
    """A read tool whose name is hostile text."""
    return x + 1


@orp.agent(HOSTILE_AGENT)
def hostile_agent(x: int) -> dict[str, Any]:
    """An agent whose name is hostile text, calling a tool whose name is too."""
    return {"answer": str(hostile_tool(x))}


@orp.agent(HOSTILE_AGENT)
def hostile_agent_changed(x: int) -> dict[str, Any]:
    """The hostile agent calling its tool with other arguments."""
    return {"answer": str(hostile_tool(x + 10))}


# ------------------------------------------------------------------------------------------------ scorers


@scorer(name="lab_test_no_error")
def no_error(original: Run, replay: Run | None) -> bool | None:
    """The replay ended without an error."""
    return None if replay is None else replay.status == "ok"


@scorer(name="lab_test_answer_words", higher_is_better=True, tolerance=0)
def answer_words(original: Run, replay: Run | None) -> int | None:
    """Words in the replay's answer."""
    if replay is None:
        return None
    out = replay.snapshots.get("output") or {}
    answer = out.get("answer") if isinstance(out, dict) else None
    return len(answer.split()) if isinstance(answer, str) else None


@scorer(name="lab_test_explodes")
def explodes(original: Run, replay: Run | None) -> bool:
    """A scorer with a bug: it raises on every replay (never on the original against itself)."""
    if replay is not None and replay.trace_id != original.trace_id:
        raise ZeroDivisionError(f"scorer bug on {replay.agent}")
    return True


SCORER_NAMES = ("lab_test_no_error", "lab_test_answer_words", "lab_test_explodes")
