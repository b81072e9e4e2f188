"""The tool calls of one model answer replay in whatever order the framework runs them.

A framework runs the tool calls a model asked for in one answer in an order of its own: LangGraph's ``ToolNode``
maps them over a thread pool, the Agents SDK gathers them. Calls too short to overlap in time still come in
either order, so a replay that held them to the recorded order would say ``diverged`` on unchanged code about
half the time. A model call between two tool calls still fixes their order, and a changed argument still
diverges.

The agent lives in this module (importable as ``test_replay_tool_batches:batch``) because a replay re-imports
the recorded entrypoint; ``ORDER`` is the order this process runs the batch in, as a thread pool would pick it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import otel_replay as orp
from otel_replay.replay.engine import replay_run
from otel_replay.storage.store import Store

ORDER: list[tuple[str, str]] = []
"""The calls of the batch as this process runs them: ``(tool, key)``."""
LEDGER: list[str] = []
"""Real executions of the tools."""


@orp.tool("batch_lookup_order", risk="read")
def lookup_order(key: str) -> str:
    LEDGER.append(f"order {key}")
    return f"order {key.upper()}"


@orp.tool("batch_lookup_customer", risk="read")
def lookup_customer(key: str) -> str:
    LEDGER.append(f"customer {key}")
    return f"customer {key.upper()}"


@orp.model("batch_planner")
def plan(question: str) -> str:
    return f"plan for {question}"


_TOOLS = {"order": lookup_order, "customer": lookup_customer}


@orp.agent("batch-agent")
def batch(question: str, think_between: bool = False) -> list[str]:
    """One model answer, then its tool calls in :data:`ORDER`; with ``think_between`` a model call between
    them (each call then answers its own model call, so their order is the agent's)."""
    plan(question)
    out = []
    for i, (tool, key) in enumerate(ORDER):
        if think_between and i:
            plan("and then?")
        out.append(_TOOLS[tool](key))
    return sorted(out)


@pytest.fixture
def clean() -> Iterator[None]:
    ORDER.clear()
    LEDGER.clear()
    yield
    ORDER.clear()
    LEDGER.clear()


def _recorded(question: str, think_between: bool, order: list[tuple[str, str]]) -> Any:
    ORDER[:] = order
    batch(question, think_between)
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="batch-agent", kind="original")
        return store.load_run(summary.trace_id)


@pytest.mark.parametrize(
    "calls",
    [
        [("order", "o1"), ("customer", "c1")],  # two tools
        [("order", "o1"), ("order", "o2")],  # one tool, two arguments
        [("order", "o1"), ("customer", "c1"), ("order", "o2")],
    ],
)
def test_the_calls_of_one_answer_match_in_any_order(home: Path, clean: None, calls: list[tuple[str, str]]) -> None:
    original = _recorded("q", False, calls)
    LEDGER.clear()
    for order in (calls[::-1], calls[1:] + calls[:1]):
        ORDER[:] = order
        for mode in ("mock", "deterministic"):
            replayed = replay_run(original, mode=mode)
            assert replayed.outcome == "matched", (order, mode, replayed.divergences)
    assert LEDGER == []  # every call answered from the recording


def test_a_changed_argument_in_a_batch_still_diverges(home: Path, clean: None) -> None:
    original = _recorded("q", False, [("order", "o1"), ("customer", "c1")])
    ORDER[:] = [("customer", "c1"), ("order", "o9")]
    replayed = replay_run(original, mode="mock")
    assert replayed.outcome == "diverged"
    assert [(d.kind, d.step_index) for d in replayed.divergences][:1] == [("arguments", 1)], replayed.divergences


def test_a_missing_call_of_a_batch_is_missing(home: Path, clean: None) -> None:
    original = _recorded("q", False, [("order", "o1"), ("customer", "c1")])
    ORDER[:] = [("customer", "c1")]
    replayed = replay_run(original, mode="mock")
    assert [(d.kind, d.step_index) for d in replayed.divergences if d.kind == "missing_call"] == [("missing_call", 1)]


def test_calls_answering_different_model_calls_keep_their_order(home: Path, clean: None) -> None:
    original = _recorded("q", True, [("order", "o1"), ("customer", "c1")])
    ORDER[:] = [("customer", "c1"), ("order", "o1")]
    replayed = replay_run(original, mode="mock")
    assert replayed.outcome == "diverged"
    assert {d.kind for d in replayed.divergences} >= {"missing_call"}, replayed.divergences
