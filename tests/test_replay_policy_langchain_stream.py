"""A replay policy's model overrides on a real LangChain chat model (``ChatOpenAI``) that streams, and on
``batch`` / ``abatch``: ``stream`` / ``astream`` send the model their own request, not through
``_generate_with_cache``, so the overrides must be applied there too. A whatif replay sends the overridden
model, parameter and system prompt to the project's fake OpenAI-compatible server (its request log is the
proof), and a deterministic replay sees the changed request as a ``request`` divergence at the first model
step, as ``invoke`` does.

Only the LangChain instrumentor is on: the OpenAI client under ``ChatOpenAI`` is not instrumented, so what
reaches the server is what the LangChain wrappers made of the call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_llm_servers import FakeLLMServer
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.langchain import LangChainInstrumentor
from otel_replay.replay.matching.policy import ReplayPolicy
from otel_replay.storage.store import Store

SYSTEM = "You are a weather assistant."
BASE_URL: dict[str, str] = {}
"""The fake server's URL, read by the agents at call time (a replay runs them again)."""


def _model() -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=BASE_URL["url"],
        api_key="sk-test-" + "4" * 32,
        max_retries=0,
        temperature=0.5,
        http_async_client=httpx.AsyncClient(),  # its own: the default one is shared by every event loop
    )


def _messages(question: str) -> list[Any]:
    return [SystemMessage(content=SYSTEM), HumanMessage(content=question)]


@orp.agent("policy-lc-stream-agent")
def stream_agent(question: str) -> str:
    """One streamed chat model call (the model streams: ``stream`` sends its own request)."""
    return "".join(str(chunk.content) for chunk in _model().stream(_messages(question)))


@orp.agent("policy-lc-astream-agent")
async def astream_agent(question: str) -> str:
    """The async twin: one ``astream`` call."""
    return "".join([str(chunk.content) async for chunk in _model().astream(_messages(question))])


@orp.agent("policy-lc-batch-agent")
def batch_agent(question: str) -> list[str]:
    """Two calls through ``batch`` (LangChain runs them in its thread pool)."""
    replies = _model().batch([_messages(question), _messages(question + " tomorrow")])
    return [str(r.content) for r in replies]


@orp.agent("policy-lc-abatch-agent")
async def abatch_agent(question: str) -> list[str]:
    """The async twin: two calls through ``abatch``."""
    replies = await _model().abatch([_messages(question), _messages(question + " tomorrow")])
    return [str(r.content) for r in replies]


@pytest.fixture
def server(home: Path) -> Iterator[FakeLLMServer]:
    """The LangChain instrumentor on and a fresh fake server the agents point at."""
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument()
    try:
        with FakeLLMServer() as fake:
            BASE_URL["url"] = fake.openai_url
            yield fake
    finally:
        instrumentor.uninstrument()
        BASE_URL.clear()


def record(agent: Any, question: str) -> str:
    """Run ``agent`` once and return the trace id of its run."""
    out = agent(question)
    if asyncio.iscoroutine(out):
        asyncio.run(out)
    orp.flush()
    with Store.open() as store:
        return next(s.trace_id for s in store.runs(agent=agent.__otel_replay__["name"], kind="original"))


def sent(server: FakeLLMServer, since: int) -> list[tuple[Any, Any, Any, bool]]:
    """(model, temperature, system prompt, stream) of each request the server received since ``since``."""
    out = []
    for _, body in server.requests[since:]:
        system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), None)
        out.append((body.get("model"), body.get("temperature"), system, bool(body.get("stream"))))
    return out


POLICY = ReplayPolicy(model="terse-stream", params={"temperature": 0}, prompts={"system": "Answer in one word."})


@pytest.mark.parametrize("agent", [stream_agent, astream_agent], ids=["stream", "astream"])
def test_a_streamed_langchain_call_gets_the_overrides(server: FakeLLMServer, agent: Any) -> None:
    tid = record(agent, "Weather in Paris?")
    assert sent(server, 0) == [("gpt-4o-mini", 0.5, SYSTEM, True)]
    with Store.open() as store:
        (step,) = [s for s in store.load_run(tid).steps if s.kind == "model"]

    whatif = orp.replay(tid, mode="whatif", reason="streamed override check", policy=POLICY)
    assert sent(server, 1) == [("terse-stream", 0, "Answer in one word.", True)]
    assert whatif.replay.snapshots["output"]["answer"] == "terse: Weather"
    (replayed,) = [s for s in whatif.replay.steps if s.kind == "model"]
    assert replayed.attributes[semconv.REPLAY_SERVED] == "executed"
    assert [d.kind for d in whatif.divergences] == ["output"]

    deterministic = orp.replay(tid, mode="deterministic", policy=ReplayPolicy(prompts={"system": "Be terse."}))
    first = deterministic.first_divergence
    assert (first.kind, first.step_index) == ("request", step.index)
    assert "Be terse." in (first.diff or "") and SYSTEM in (first.diff or "")
    assert deterministic.outcome == "diverged" and server.count == 2  # answered from the recording

    unchanged = orp.replay(tid, mode="deterministic", policy=ReplayPolicy())
    assert unchanged.outcome == "matched", unchanged.divergences
    assert server.count == 2


@pytest.mark.parametrize("agent", [batch_agent, abatch_agent], ids=["batch", "abatch"])
def test_a_batched_langchain_call_gets_the_overrides(server: FakeLLMServer, agent: Any) -> None:
    tid = record(agent, "Weather in Oslo?")
    assert server.count == 2
    whatif = orp.replay(tid, mode="whatif", reason="batched override check", policy=POLICY)
    assert sent(server, 2) == [("terse-stream", 0, "Answer in one word.", False)] * 2
    assert whatif.replay.snapshots["output"]["structured"] == ["terse: Weather", "terse: Weather"]
    deterministic = orp.replay(tid, mode="deterministic", policy=ReplayPolicy(params={"temperature": 0}))
    assert deterministic.first_divergence.kind == "request" and server.count == 4
