"""Runs follow threads in the frameworks' own executors: LangGraph's ``ToolNode`` (sync tools in its thread
pool), a LangChain tool through ``asyncio.to_thread``, LlamaIndex ``FunctionTool`` calls in a pool and from an
async agent, and an OpenAI Agents SDK ``Runner.run_sync`` in a pool worker. Each is started inside an
``@orp.agent`` run with the framework's instrumentor on and no ``@orp.tool`` on the tools: every tool call (and
model call) is a step of that run, parented under its root, and a mock replay of it is ``matched`` without
running the tools again. ``RAN`` counts the tools' real executions.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import FakeLLMServer

import otel_replay as orp
from otel_replay.instrumentation import uninstrument
from otel_replay.replay.engine import replay_run
from otel_replay.storage.store import Store

RAN: Counter[str] = Counter()
_LOCK = threading.Lock()
POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="made-before-any-run")
"""Created at import, before any run: each work item carries its submitter's context, not the worker's."""
WAIT = 60
"""Seconds a pool work item may take before the test fails (a deadlock guard, never a synchronisation)."""


def _ran(name: str) -> None:
    with _LOCK:
        RAN[name] += 1


def _recorded(agent: str) -> Any:
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return store.load_run(summary.trace_id)


def _all_under_the_root(run: Any) -> None:
    (root,) = [span for span in run.spans if not span.parent_span_id]
    assert {s.parent_span_id for s in run.steps} == {root.span_id}


def _replays_matched_without_running(run: Any) -> None:
    before = Counter(RAN)
    result = replay_run(run, mode="mock")
    assert result.outcome == "matched", result.divergences
    assert before == RAN, "a mock replay ran a tool again"


@pytest.fixture
def clean(home: Path) -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


# ------------------------------------------------------------------------------------------------ LangChain


def _langchain_tools() -> tuple[Any, Any]:
    from langchain_core.tools import tool

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        _ran("lookup_order")
        return f"order {order_id}: shipped"

    @tool
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        _ran("refund_order")
        return f"refunded {order_id}"

    return lookup_order, refund_order


@orp.agent("thr-toolnode")
def toolnode_agent(order_id: str) -> list[str]:
    """LangGraph's ``ToolNode`` given two tool calls: it runs sync tools in its executor's threads; then a tool
    through ``asyncio.to_thread``."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    lookup_order, refund_order = _langchain_tools()
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([lookup_order, refund_order]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    calls = [
        {"name": "lookup_order", "args": {"order_id": order_id}, "id": "call_1", "type": "tool_call"},
        {"name": "refund_order", "args": {"order_id": order_id}, "id": "call_2", "type": "tool_call"},
    ]
    out = graph.compile().invoke({"messages": [AIMessage("", tool_calls=calls)]})
    again = asyncio.run(asyncio.to_thread(lookup_order.invoke, {"order_id": order_id}))
    return [m.content for m in out["messages"][1:]] + [again]


def test_langgraph_toolnode_threads_and_to_thread_are_steps_of_the_run(clean: None) -> None:
    orp.instrument("langchain")
    try:
        assert toolnode_agent("A1") == ["order A1: shipped", "refunded A1", "order A1: shipped"]
        run = _recorded("thr-toolnode")
        tools = [(s.kind, s.name) for s in sorted(run.steps, key=lambda s: s.index)]
        assert sorted(tools[:2]) == [("tool", "lookup_order"), ("tool", "refund_order")]  # concurrent: either order
        assert tools[2] == ("tool", "lookup_order")
        _all_under_the_root(run)
        assert RAN == {"lookup_order": 2, "refund_order": 1}
        _replays_matched_without_running(run)
    finally:
        uninstrument("langchain")


# ----------------------------------------------------------------------------------------------- LlamaIndex


def _weather(city: str) -> str:
    """The weather in a city."""
    _ran("weather")
    return f"sunny in {city}"


@orp.agent("thr-llamaindex")
def llamaindex_agent(city: str) -> list[str]:
    """A ``FunctionTool`` called in a pool work item, then awaited (``acall`` of a sync function) in a loop."""
    from llama_index.core.tools import FunctionTool

    tool = FunctionTool.from_defaults(fn=_weather, name="weather")
    first = POOL.submit(tool.call, city=city).result(WAIT)
    second = asyncio.run(tool.acall(city=city))
    return [str(first), str(second)]


def test_llamaindex_tool_calls_in_a_pool_and_acall_are_steps_of_the_run(clean: None) -> None:
    orp.instrument("llamaindex")
    try:
        assert llamaindex_agent("Oslo") == ["sunny in Oslo", "sunny in Oslo"]
        run = _recorded("thr-llamaindex")
        assert [(s.kind, s.name, s.index) for s in run.steps] == [("tool", "weather", 0), ("tool", "weather", 1)]
        _all_under_the_root(run)
        assert RAN == {"weather": 2}
        _replays_matched_without_running(run)
    finally:
        uninstrument("llamaindex")


# ----------------------------------------------------------------------------------------- OpenAI Agents SDK


@orp.agent("thr-agents-sdk")
def agents_sdk_agent(base_url: str, question: str) -> str:
    """``Runner.run_sync`` in a pool work item (a web handler's shape): its model call and its sync
    ``@function_tool`` call belong to the run that submitted it."""
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        _ran("get_weather")
        return f"sunny in {city}"

    client = AsyncOpenAI(base_url=base_url, api_key="sk-test-not-a-key", max_retries=0)
    agent = Agent(
        name="Forecaster",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    )
    return str(POOL.submit(Runner.run_sync, agent, question).result(WAIT).final_output)


def test_an_agents_sdk_run_in_a_pool_is_steps_of_the_run_that_submitted_it(clean: None) -> None:
    orp.instrument("openai_agents")
    try:
        with FakeLLMServer(tool_args_for={"get_weather": {"city": "Oslo"}}) as server:
            answer = agents_sdk_agent(server.openai_url, "Weather in Oslo?")
            assert "sunny in Oslo" in answer
            run = _recorded("thr-agents-sdk")
            steps = [(s.kind, s.name) for s in sorted(run.steps, key=lambda s: s.index)]
            assert ("tool", "get_weather") in steps and steps[0][0] == "model", steps
            assert RAN == {"get_weather": 1}
            sent = server.count
            _replays_matched_without_running(run)
            assert server.count == sent, "a mock replay sent a model request"
        with Store.open() as store:
            assert len(store.runs(kind="original")) == 1, "the pool work item recorded a run of its own"
    finally:
        uninstrument("openai_agents")
