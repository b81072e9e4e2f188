"""Parallel handoffs: a supervisor hands one request to two agents at once, and a replay rebuilds the
``Command`` whose ``goto`` is a list of ``Send``.

``langgraph-supervisor``'s handoff tools answer a model answer with several handoffs by
``Command(graph=Command.PARENT, goto=[Send(agent, state)])``, and ``ToolNode`` merges those into one ``Command``
that starts every agent. ``create_supervisor(parallel_tool_calls=True)`` itself runs only the first agent to
finish (its supervisor agent sends each tool call to its own ``ToolNode``, langgraph-supervisor issue #230);
the graph here is the one that issue gives as the way out: the supervisor agent built with
``create_react_agent(..., version="v1")``, so one ``ToolNode`` runs both handoffs. Both booking agents then run
side by side, and a replay must hand LangGraph the recorded ``Send``s as ``Send``s (not dicts), their messages
carrying the replay's ids.

The graph lives in this module (``test_langgraph_parallel_handoffs:invoke``, which builds it against the fake
server of the test) because a replay imports the entrypoint again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import FakeLLMServer
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent
from langgraph_supervisor import create_handoff_tool

import otel_replay as orp
from otel_replay.storage.store import Store

BOOKED: list[str] = []
"""Real executions of the booking tools."""
HANDOFFS = ("transfer_to_flight_assistant", "transfer_to_hotel_assistant")


def book_flight(from_airport: str, to_airport: str) -> str:
    """Book a flight"""
    BOOKED.append(f"flight {from_airport}-{to_airport}")
    return f"Successfully booked a flight from {from_airport} to {to_airport}."


def book_hotel(hotel_name: str) -> str:
    """Book a hotel"""
    BOOKED.append(f"hotel {hotel_name}")
    return f"Successfully booked a stay at {hotel_name}."


def _graph() -> Any:
    model = ChatOpenAI(model="gpt-4o")
    flight = create_react_agent(model, [book_flight], prompt="You book flights", name="flight_assistant")
    hotel = create_react_agent(model, [book_hotel], prompt="You book hotels", name="hotel_assistant")
    supervisor = create_react_agent(
        model,
        [create_handoff_tool(agent_name="flight_assistant"), create_handoff_tool(agent_name="hotel_assistant")],
        prompt="You manage a flight and a hotel booking assistant. Assign work to them.",
        name="supervisor",
        version="v1",
    )
    builder = StateGraph(MessagesState)
    builder.add_node(supervisor, destinations=("flight_assistant", "hotel_assistant"))
    builder.add_node(flight)
    builder.add_node(hotel)
    builder.add_edge(START, "supervisor")
    builder.add_edge("flight_assistant", END)
    builder.add_edge("hotel_assistant", END)
    return builder.compile()


def invoke(input: Any) -> Any:  # noqa: A002 - graph.invoke's own parameter name, as its run records it
    return _graph().invoke(input)


QUESTION = {"messages": [{"role": "user", "content": "book a flight from BOS to JFK and a stay at McKittrick"}]}


@pytest.fixture
def server(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    fake = FakeLLMServer(
        volatile_ids=True,
        parallel_tools=HANDOFFS,
        per_agent_tools=True,
        tool_args_for={
            **{name: {} for name in HANDOFFS},
            "book_flight": {"from_airport": "BOS", "to_airport": "JFK"},
            "book_hotel": {"hotel_name": "McKittrick"},
        },
    )
    with fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "1" * 32)
        done = orp.instrument("langchain", tool_risks={"book_flight": "write", "book_hotel": "write"})
        BOOKED.clear()
        try:
            yield fake
        finally:
            orp.uninstrument(*done)
            BOOKED.clear()


def test_parallel_handoffs_run_both_agents_and_replay_matched(server: FakeLLMServer) -> None:
    out = invoke(QUESTION)
    assert sorted(BOOKED) == ["flight BOS-JFK", "hotel McKittrick"]  # both agents ran
    final = [m.content for m in out["messages"] if m.type == "ai" and m.content]
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
        run = store.load_run(summary.trace_id)
    kinds = [(s.kind, s.name) for s in run.steps]
    assert sorted(k for k in kinds if k[0] == "handoff") == [("handoff", name) for name in HANDOFFS]
    assert sorted(k for k in kinds if k[0] == "agent") == [
        ("agent", "flight_assistant"),
        ("agent", "hotel_assistant"),
        ("agent", "supervisor"),
    ]
    requests = server.count
    BOOKED.clear()
    for mode in ("mock", "deterministic"):
        result = orp.replay(run.trace_id, mode=mode, entrypoint="test_langgraph_parallel_handoffs:invoke")
        assert result.outcome == "matched", (mode, result.divergences)
        assert not [n for n in result.notes if "unregistered" in n], result.notes  # every Command and Send rebuilt
    assert server.count == requests and BOOKED == []  # offline: no request, no booking
    live = orp.replay(
        run.trace_id,
        mode="live",
        reason="parallel handoffs",
        approvals=["book_flight", "book_hotel"],
        entrypoint="test_langgraph_parallel_handoffs:invoke",
    )
    assert live.outcome == "matched", (live.refusal, live.divergences)
    assert sorted(BOOKED) == ["flight BOS-JFK", "hotel McKittrick"]
    assert final  # the agents answered
