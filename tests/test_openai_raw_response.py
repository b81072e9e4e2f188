"""``with_raw_response`` calls of the real ``openai`` SDK, and ``ChatOpenAI`` (which makes its calls that way),
recorded and replayed with only the OpenAI instrumentor on.

The agents run against the local fake server, are recorded into a real embedded store, and are replayed in
mock and deterministic mode while the server counts requests: a replay sends none, answers each raw call with a
stand-in raw response (``parse()``, ``status_code``, ``headers``, ``http_request``), and matches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import langchain_openai
import openai
import pytest
from fake_llm_servers import FakeLLMServer

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.langchain import LangChainInstrumentor
from otel_replay.instrumentation.openai import OpenAIInstrumentor
from otel_replay.storage.store import Store

BASE_URL = ""
"""The fake server's URL; the agents read it at call time (a replay re-imports this module's agents)."""
KEY = "sk-test-" + "2" * 32
MODEL = "gpt-4o-mini"


@orp.agent("raw-sdk-agent")
def raw_sdk_agent(question: str) -> dict[str, Any]:
    """The plain SDK through ``with_raw_response``: sync, streamed, async."""
    client = openai.OpenAI(base_url=BASE_URL, api_key=KEY, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": question}]
    )
    parsed = raw.parse()
    assert isinstance(parsed, openai.types.chat.ChatCompletion) and raw.parse() is parsed
    seen = {
        "status": raw.status_code,
        "method": raw.http_request.method,
        "has_headers": hasattr(raw, "headers"),
        "text": parsed.choices[0].message.content,
    }
    streamed = client.chat.completions.with_raw_response.create(
        model=MODEL, stream=True, messages=[{"role": "user", "content": f"streamed {question}"}]
    )
    seen["streamed"] = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)

    async def async_call() -> str:
        aclient = openai.AsyncOpenAI(base_url=BASE_URL, api_key=KEY, max_retries=0)
        araw = await aclient.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": f"async {question}"}]
        )
        return str(araw.parse().choices[0].message.content)

    seen["async"] = asyncio.run(async_call())
    return seen


@orp.agent("chat-openai-agent")
def chat_openai_agent(question: str) -> dict[str, str]:
    """``ChatOpenAI`` invoked and streamed (with response headers: its streamed call goes through the raw
    response too)."""
    plain = langchain_openai.ChatOpenAI(model=MODEL, base_url=BASE_URL, api_key=KEY, max_retries=0)
    with_headers = langchain_openai.ChatOpenAI(
        model=MODEL, base_url=BASE_URL, api_key=KEY, max_retries=0, include_response_headers=True
    )
    return {
        "invoke": str(plain.invoke(question).content),
        "stream": "".join(str(c.content) for c in with_headers.stream(f"stream {question}")),
    }


@pytest.fixture(autouse=True)
def openai_only() -> Iterator[None]:
    """Only the OpenAI instrumentor on (LangChain's off, as in an app that instruments only ``openai``)."""
    langchain_was = LangChainInstrumentor().is_instrumented_by_opentelemetry
    if langchain_was:
        LangChainInstrumentor().uninstrument()
    instrumentor = OpenAIInstrumentor()
    was = instrumentor.is_instrumented_by_opentelemetry
    if not was:
        instrumentor.instrument()
    yield
    if not was:
        instrumentor.uninstrument()
    if langchain_was:
        LangChainInstrumentor().instrument()


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A fresh fake server with fresh ids per answer; the agents point at it."""
    global BASE_URL
    with FakeLLMServer(volatile_ids=True) as fake:
        BASE_URL = fake.openai_url
        yield fake


def _recorded(agent: str) -> Any:
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return store.load_run(summary.trace_id)


def test_raw_response_calls_are_recorded_and_replayed_without_a_request(home: Path, server: FakeLLMServer) -> None:
    recorded_output = raw_sdk_agent("hello")
    assert recorded_output == {
        "status": 200,
        "method": "POST",
        "has_headers": True,
        "text": "echo: hello",
        "streamed": "echo: streamed hello",
        "async": "echo: async hello",
    }
    assert server.count == 3
    run = _recorded("raw-sdk-agent")
    assert [(s.kind, s.name) for s in run.steps] == [("model", "openai.chat.completions")] * 3
    first, streamed, _ = run.steps
    assert first.snapshots["model"]["response"]["choices"][0]["message"]["content"] == "echo: hello"
    assert streamed.snapshots["model"]["response"]["complete"] is True
    assert "extra_headers" not in first.snapshots["model"]["request"]  # the raw marker is transport

    for mode in ("mock", "deterministic"):
        result = orp.replay(run.trace_id, mode=mode)
        assert result.outcome == "matched", (mode, result.divergences)
        assert [s.attributes.get(semconv.REPLAY_SERVED) for s in result.replay.steps] == ["recording"] * 3
    assert server.count == 3


def test_chat_openai_replays_with_only_the_openai_instrumentor(home: Path, server: FakeLLMServer) -> None:
    assert chat_openai_agent("hi") == {"invoke": "echo: hi", "stream": "echo: stream hi"}
    assert server.count == 2
    run = _recorded("chat-openai-agent")
    assert [(s.kind, s.name) for s in run.steps] == [("model", "openai.chat.completions")] * 2
    assert run.steps[1].snapshots["model"]["request"]["stream"] is True

    for mode in ("mock", "deterministic"):
        result = orp.replay(run.trace_id, mode=mode)
        assert result.outcome == "matched", (mode, result.divergences)
    assert server.count == 2


def test_a_changed_prompt_through_the_raw_response_is_a_request_divergence(home: Path, server: FakeLLMServer) -> None:
    raw_sdk_agent("hello")
    run = _recorded("raw-sdk-agent")
    result = orp.replay(run.trace_id, mode="deterministic", entrypoint=f"{__name__}:changed_question_agent")
    assert result.outcome == "diverged"
    first = result.first_divergence
    assert (first.kind, first.step_index) == ("request", 0)
    assert '-      "content": "hello",' in first.diff and '+      "content": "hello again",' in first.diff
    assert server.count == 3


def changed_question_agent(question: str) -> dict[str, Any]:
    """The agent after a change: it asks something else."""
    return raw_sdk_agent.__wrapped__(f"{question} again")
