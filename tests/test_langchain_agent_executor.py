"""``AgentExecutor.invoke`` / ``ainvoke`` (a legacy ``Chain``, from ``langchain_classic``) is one run with every
model call and tool call as a step, in process, against the fake OpenAI server through ``ChatOpenAI``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import FakeLLMServer
from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
from langchain_classic.chains.base import Chain
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import otel_replay as orp
from otel_replay.instrumentation.langchain import LangChainInstrumentor
from otel_replay.storage.store import Store

BASE_URL = ""
"""The fake server's URL; read when the executor is built (a replay re-imports this module)."""
CALLS: list[str] = []
STEPS = [("model", "ChatOpenAI"), ("tool", "lookup_city"), ("model", "ChatOpenAI")]


@tool
def lookup_city(city: str) -> str:
    """Look a city up."""
    CALLS.append(city)
    return f"{city} is in France"


def build_executor() -> AgentExecutor:
    """The tool-calling agent of LangChain's docs, run by ``AgentExecutor``."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are helpful."), ("human", "{input}"), ("placeholder", "{agent_scratchpad}")]
    )
    model = ChatOpenAI(model="gpt-4o-mini", base_url=BASE_URL, api_key="sk-test-" + "3" * 32, max_retries=0)
    return AgentExecutor(agent=create_tool_calling_agent(model, [lookup_city], prompt), tools=[lookup_city])


def executor_entry(input: dict[str, Any]) -> Any:  # noqa: A002 - the implicit run records the input as "input"
    """``--app`` entrypoint for a run begun at ``AgentExecutor.invoke``."""
    return build_executor().invoke(input)


@orp.agent("explicit-agent")
def explicit_agent(question: str) -> str:
    """An ``@orp.agent`` around the executor: its calls are steps of this run, no run of its own."""
    return str(build_executor().invoke({"input": question})["output"])


@pytest.fixture
def world(home: Path) -> Iterator[FakeLLMServer]:
    """The LangChain instrumentation on and the fake server up."""
    global BASE_URL
    CALLS.clear()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument()
    try:
        with FakeLLMServer(volatile_ids=True) as server:
            BASE_URL = server.openai_url
            yield server
    finally:
        instrumentor.uninstrument()


def _runs(agent: str) -> list[orp.Run]:
    orp.flush()
    with Store.open() as store:
        return [store.load_run(s.trace_id) for s in store.runs(agent=agent, kind="original")]


def test_agent_executor_invoke_is_one_run_with_every_call_a_step(world: FakeLLMServer) -> None:
    assert build_executor().invoke({"input": "where is Paris"})["output"] == "The weather: Paris is in France"
    assert (
        asyncio.run(build_executor().ainvoke({"input": "where is Lyon"}))["output"] == "The weather: Paris is in France"
    )
    orp.flush()
    with Store.open() as store:
        assert {s.agent for s in store.runs()} == {"AgentExecutor"}  # no run per model or tool call
    runs = _runs("AgentExecutor")
    assert len(runs) == 2
    for run in runs:
        assert [(s.kind, s.name) for s in run.steps] == STEPS
        assert not run.entrypoint
    assert world.count == 4

    CALLS.clear()
    for mode in ("mock", "deterministic"):
        result = orp.replay(runs[0].trace_id, mode=mode, entrypoint=f"{__name__}:executor_entry")
        assert result.outcome == "matched", (mode, result.divergences)
    assert world.count == 4 and CALLS == []


def test_agent_executor_inside_an_agent_adds_steps_not_runs(world: FakeLLMServer) -> None:
    explicit_agent("where is Paris")
    (run,) = _runs("explicit-agent")
    assert [(s.kind, s.name) for s in run.steps] == STEPS
    assert _runs("AgentExecutor") == []


def test_uninstrument_restores_chain_invoke(world: FakeLLMServer) -> None:
    assert hasattr(Chain.invoke, "__wrapped__") and hasattr(Chain.ainvoke, "__wrapped__")
    LangChainInstrumentor().uninstrument()
    try:
        assert not hasattr(Chain.invoke, "__wrapped__") and not hasattr(Chain.ainvoke, "__wrapped__")
    finally:
        LangChainInstrumentor().instrument()
