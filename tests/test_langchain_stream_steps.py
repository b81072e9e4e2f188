"""A streamed LangChain chat model call is one model step, with the ``openai`` instrumentor on as well.

``ChatOpenAI.stream`` / ``astream`` call the ``openai`` client themselves. That call is inside the LangChain
model step, so the OpenAI instrumentor must leave it to that step (``recording.in_model_step``) instead of
recording a second model step of its own. ``stream`` advances the model's stream inside the step's context;
``astream`` must see the step too, although an async generator cannot be advanced inside another context
before Python 3.11. A mock replay of either answers from the one recorded step without a request.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
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


PROBES: list[tuple[str, str]] = []
"""What each connection the agent tried outside the model call did: (where, "connected" | "blocked")."""


def _probe(where: str) -> None:
    url = urlparse(BASE_URL["url"])
    try:
        socket.create_connection((url.hostname, url.port), timeout=5).close()
        PROBES.append((where, "connected"))
    except PermissionError:  # the replay's side-effect guard
        PROBES.append((where, "blocked"))


@orp.agent("lc-astream-probe")
async def astream_probe_agent(question: str) -> str:
    out = []
    async for chunk in _model().astream(_messages(question)):
        out.append(str(chunk.content))
        _probe("between chunks")
    _probe("after the stream")
    return "".join(out)


@orp.agent("lc-stream-probe")
def stream_probe_agent(question: str) -> str:
    out = []
    for chunk in _model().stream(_messages(question)):
        out.append(str(chunk.content))
        _probe("between chunks")
    _probe("after the stream")
    return "".join(out)


@pytest.mark.parametrize("agent", [stream_probe_agent, astream_probe_agent], ids=["stream", "astream"])
def test_a_whatif_stream_lets_only_its_model_call_connect(server: FakeLLMServer, agent: Any) -> None:
    PROBES.clear()
    tid = _record(agent, "Weather in Quito?")
    assert PROBES and {how for _, how in PROBES} == {"connected"}  # recording guards nothing
    PROBES.clear()

    result = orp.replay(tid, mode="whatif", reason="the stream's permission stays with its step")

    assert server.count == 2  # the model call connected
    assert result.replay.snapshots["output"]["answer"]
    wheres = {where for where, _ in PROBES}
    assert wheres == {"between chunks", "after the stream"}, PROBES
    assert {how for _, how in PROBES} == {"blocked"}, PROBES  # the consumer's own connections never
