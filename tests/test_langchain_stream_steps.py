"""A streamed LangChain chat model call is one model step, with the ``openai`` instrumentor on as well.

``ChatOpenAI.stream`` / ``astream`` call the ``openai`` client themselves. That call is inside the LangChain
model step, so the OpenAI instrumentor must leave it to that step (``recording.in_model_step``) instead of
recording a second model step of its own. ``stream`` advances the model's stream inside the step's context;
``astream`` must see the step too, although an async generator cannot be advanced inside another context
before Python 3.11. A mock replay of either answers from the one recorded step without a request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("langchain_openai")

from fake_llm_servers import FakeLLMServer
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

import otel_replay as orp
from otel_replay.storage.store import Store

BASE_URL: dict[str, str] = {}
"""The fake server's URL, read by the agents at call time (a replay runs them again)."""


def _model() -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=BASE_URL["url"],
        api_key="sk-test-" + "5" * 32,
        max_retries=0,
        streaming=True,
        http_async_client=httpx.AsyncClient(),  # its own: the default one is shared by every event loop
    )


def _messages(question: str) -> list[Any]:
    return [SystemMessage(content="You are a weather assistant."), HumanMessage(content=question)]


@orp.agent("lc-stream-steps")
def stream_agent(question: str) -> str:
    return "".join(str(chunk.content) for chunk in _model().stream(_messages(question)))


@orp.agent("lc-astream-steps")
async def astream_agent(question: str) -> str:
    return "".join([str(chunk.content) async for chunk in _model().astream(_messages(question))])


@orp.agent("lc-astream-twice")
async def astream_twice_agent(question: str) -> str:
    """Two streamed calls, the second interleaved with nothing: each is its own step, never nested."""
    first = "".join([str(chunk.content) async for chunk in _model().astream(_messages(question))])
    second = "".join([str(chunk.content) async for chunk in _model().astream(_messages(first))])
    return second


@pytest.fixture
def server(home: Path) -> Iterator[FakeLLMServer]:
    """The LangChain and OpenAI instrumentors on, and a fresh fake server the agents point at."""
    orp.instrument("langchain", "openai")
    try:
        with FakeLLMServer() as fake:
            BASE_URL["url"] = fake.openai_url
            yield fake
    finally:
        orp.uninstrument("langchain", "openai")
        BASE_URL.clear()


def _record(agent: Any, question: str) -> str:
    out = agent(question)
    if asyncio.iscoroutine(out):
        out = asyncio.run(out)
    assert isinstance(out, str) and out
    orp.flush()
    with Store.open() as store:
        return next(s.trace_id for s in store.runs(agent=agent.__otel_replay__["name"], kind="original"))


@pytest.mark.parametrize(
    ("agent", "calls"),
    [(stream_agent, 1), (astream_agent, 1), (astream_twice_agent, 2)],
    ids=["stream", "astream", "astream-twice"],
)
def test_a_streamed_call_is_one_model_step_and_mock_replays_without_a_request(
    server: FakeLLMServer, agent: Any, calls: int
) -> None:
    tid = _record(agent, "Weather in Lima?")
    assert server.count == calls
    with Store.open() as store:
        run = store.load_run(tid)
    models = [s for s in run.steps if s.kind == "model"]
    assert len(models) == calls, [(s.name, s.attributes.get("otel_replay.instrumentation")) for s in run.steps]

    replayed = orp.replay(tid, mode="mock")
    assert replayed.outcome == "matched", replayed.divergences
    assert server.count == calls
