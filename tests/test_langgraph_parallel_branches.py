"""Parallel branches of a LangGraph graph (``Send``, the map-reduce of LangGraph's docs) replay whatever order
their calls come in: the recording ran both branches' model calls at the same time (the fake server answers
only when both are in), a replay runs them one after the other in the other order, and a deterministic replay of
unchanged code still matches; a changed prompt still diverges. The graph's state has no ``messages``.

The graph lives in this module (``test_langgraph_parallel_branches:graph.invoke``) because a replay imports the
entrypoint again; ``ORDER`` says which branch a replay lets go first.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from fake_llm_servers import FakeLLMServer
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

import otel_replay as orp
from otel_replay.storage.store import Store

ORDER: dict[str, Any] = {"first": None, "done": threading.Event(), "prompt": "Tell a joke about"}


class Overall(TypedDict):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]


def continue_to_jokes(state: Overall) -> list[Send]:
    return [Send("generate_joke", {"subject": s}) for s in state["subjects"]]


def generate_joke(state: dict[str, str]) -> dict[str, list[str]]:
    subject = state["subject"]
    first = ORDER["first"]
    if first is not None and subject != first:  # a replay: the other branch goes first
        assert ORDER["done"].wait(timeout=30)
    try:
        response = ChatOpenAI(model="gpt-4o-mini").invoke(f"{ORDER['prompt']} {subject}")
    finally:
        if subject == first:
            ORDER["done"].set()
    return {"jokes": [str(response.content)]}


builder = StateGraph(Overall)
builder.add_node("generate_joke", generate_joke)
builder.add_conditional_edges(START, continue_to_jokes, ["generate_joke"])
builder.add_edge("generate_joke", END)
graph = builder.compile()


@pytest.fixture
def server(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(volatile_ids=True) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "1" * 32)
        done = orp.instrument("langchain")
        ORDER.update(first=None, prompt="Tell a joke about")
        ORDER["done"].clear()
        try:
            yield fake
        finally:
            orp.uninstrument(*done)


def _replay(trace_id: str, mode: str, first: str) -> orp.ReplayResult:
    ORDER["first"] = first
    ORDER["done"].clear()
    return orp.replay(trace_id, mode=mode, entrypoint="test_langgraph_parallel_branches:graph.invoke")


def test_parallel_branches_match_in_either_order_and_a_change_still_diverges(server: FakeLLMServer) -> None:
    server.rendezvous = threading.Barrier(2)  # both branches' requests in flight together
    out = graph.invoke({"subjects": ["cats", "dogs"]})
    server.rendezvous = None
    assert sorted(out["jokes"]) == ["echo: Tell a joke about cats", "echo: Tell a joke about dogs"]
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
        run = store.load_run(summary.trace_id)
    prompts = [s.snapshots["model"]["request"]["messages"][0]["content"] for s in run.steps]
    assert sorted(prompts) == ["Tell a joke about cats", "Tell a joke about dogs"]
    recorded_first = prompts[0].rsplit(" ", 1)[1]
    other = "dogs" if recorded_first == "cats" else "cats"
    requests = server.count
    for mode in ("mock", "deterministic"):
        for first in (other, recorded_first):  # the other order than the recording's, and the same
            result = _replay(run.trace_id, mode, first)
            assert result.outcome == "matched", (mode, first, result.divergences)
    assert server.count == requests
    ORDER["prompt"] = "Tell a pun about"
    changed = _replay(run.trace_id, "deterministic", other)
    assert changed.outcome == "diverged"
    assert changed.first_divergence is not None and changed.first_divergence.kind == "request"
