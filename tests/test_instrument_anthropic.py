"""The Anthropic instrumentor end to end: the real ``anthropic`` SDK against a local fake of its HTTP API.

Agents written on the plain SDK (``messages.create`` with tool_use / tool_result blocks, ``create(stream=True)``
and the ``messages.stream`` helper, sync and async) are recorded into a real embedded store, shown, and replayed
in mock and deterministic mode while the fake server counts requests: a replay must send none. A prompt
changed between recording and replay is a ``request`` divergence at the model step it changed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
import wrapt
from fake_llm_servers import MISSING_MODEL, TOOL_ARGS, FakeLLMServer

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.anthropic import AnthropicInstrumentor
from otel_replay.storage.store import Store
from otel_replay.testing import capture

PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
BASE_URL = ""
"""The fake server's URL; the agents read it at call time (a replay re-imports this module's agents)."""
PROMPT = "What is the weather in"
"""Flipped by a test between recording and replay: a changed prompt."""
MODEL = "claude-fake-1"
SYSTEM = "You are a weather assistant. Use the tools."
TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


@orp.tool
def get_weather(city: str) -> str:
    """The tool the model asks for."""
    return f"sunny in {city}"


def _round_trip(first: Any, question: str) -> list[Any]:
    use = next(b for b in first.content if b.type == "tool_use")
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": first.content},  # the SDK's own blocks, as many agents do
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": get_weather(**use.input)}],
        },
    ]


@orp.agent("anthropic-sync-agent")
def sync_agent(city: str) -> dict[str, Any]:
    """``messages.create`` with a tool round trip, then the ``messages.stream`` helper for the answer."""
    client = anthropic.Anthropic(base_url=BASE_URL, api_key="sk-ant-test-not-a-key", max_retries=0)
    question = f"{PROMPT} {city}?"
    first = client.messages.create(
        model=MODEL,
        max_tokens=256,
        system=SYSTEM,
        tools=TOOLS,
        timeout=10,
        messages=[{"role": "user", "content": question}],
    )
    assert isinstance(first, anthropic.types.Message)
    with client.messages.stream(
        model=MODEL, max_tokens=256, system=SYSTEM, tools=TOOLS, messages=_round_trip(first, question)
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    return {
        "text": text,
        "final": final.content[0].text,
        "stop": final.stop_reason,
        "tokens": final.usage.output_tokens,
    }


@orp.agent("anthropic-async-agent")
async def async_agent(city: str) -> dict[str, Any]:
    """Async: a streamed tool_use via ``create(stream=True)``, then ``messages.stream`` for the answer."""
    client = anthropic.AsyncAnthropic(base_url=BASE_URL, api_key="sk-ant-test-not-a-key", max_retries=0)
    question = f"{PROMPT} {city}?"
    events = await client.messages.create(
        model=MODEL, max_tokens=256, tools=TOOLS, stream=True, messages=[{"role": "user", "content": question}]
    )
    assert isinstance(events, anthropic.AsyncStream)
    tool_id, name, partial = None, None, ""
    async with events:
        async for event in events:
            if event.type == "content_block_start" and event.content_block.type == "tool_use":
                tool_id, name = event.content_block.id, event.content_block.name
            elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                partial += event.delta.partial_json
    messages = [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": json.loads(partial)}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": get_weather(**json.loads(partial))}],
        },
    ]
    async with client.messages.stream(model=MODEL, max_tokens=256, tools=TOOLS, messages=messages) as stream:
        chunks = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    return {"text": "".join(chunks), "final": final.content[0].text, "stop": final.stop_reason}


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    """The instrumentor on for this module, off afterwards."""
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A fresh fake server; the agents point at it."""
    global BASE_URL
    with FakeLLMServer() as fake:
        BASE_URL = fake.anthropic_url
        yield fake


@pytest.fixture
def prompt() -> Iterator[None]:
    """Restores the module prompt after a test flips it."""
    global PROMPT
    saved = PROMPT
    yield
    PROMPT = saved


def _trace_id(store: Store, agent: str) -> str:
    (summary,) = store.runs(agent=agent, kind="original")
    return summary.trace_id


# --------------------------------------------------------------------------------------------- tests


def test_agents_record_show_and_replay_without_a_request(home: Path, server: FakeLLMServer, prompt: None) -> None:
    global PROMPT
    answer = "The weather: sunny in Paris"
    assert sync_agent("Paris") == {"text": answer, "final": answer, "stop": "end_turn", "tokens": 8}
    assert asyncio.run(async_agent("Paris")) == {"text": answer, "final": answer, "stop": "end_turn"}
    assert server.count == 4
    orp.flush()
    with Store.open() as store:
        sync_tid, async_tid = _trace_id(store, "anthropic-sync-agent"), _trace_id(store, "anthropic-async-agent")
        run, arun = store.load_run(sync_tid), store.load_run(async_tid)

    expected = [("model", "anthropic.messages"), ("tool", "get_weather"), ("model", "anthropic.messages")]
    assert [(s.kind, s.name) for s in run.steps] == expected
    assert [(s.kind, s.name) for s in arun.steps] == expected
    first, _, last = run.steps
    assert first.attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert first.attributes[semconv.GEN_AI_REQUEST_MODEL] == MODEL
    assert (
        first.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS],
        first.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS],
    ) == ("18", "8")
    assert first.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["tool_use"]'
    assert last.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == "20"  # assembled from the stream's events
    assert last.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["end_turn"]'
    assert first.snapshots["model"]["response"]["content"][0] == {
        "type": "tool_use",
        "id": "toolu_fake_1",
        "name": "get_weather",
        "input": TOOL_ARGS,
    }
    assert set(first.snapshots["model"]["request"]) == {"model", "max_tokens", "system", "tools", "messages"}
    streamed = last.snapshots["model"]
    assert streamed["request"]["stream"] is True
    assert [e["type"] for e in streamed["response"]["chunks"]][:2] == ["message_start", "content_block_start"]
    assert streamed["response"]["response"]["content"] == [{"type": "text", "text": answer}]
    assert last.snapshots["context"]["system_rules"] == SYSTEM
    assert last.snapshots["context"]["tool_results"] == [
        {"tool_use_id": "toolu_fake_1", "content": "sunny in Paris", "is_error": None}
    ]
    tool_use = arun.steps[0].snapshots["model"]["response"]["response"]["content"][0]
    assert (
        tool_use["input"] == TOOL_ARGS
        and arun.steps[0].attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["tool_use"]'
    )

    for tid in (sync_tid, async_tid):
        for mode in ("mock", "deterministic"):
            result = orp.replay(tid, mode=mode)
            assert result.outcome == "matched", (mode, result.divergences)
            served = [s.attributes.get(semconv.REPLAY_SERVED) for s in result.replay.steps if s.kind == "model"]
            assert served == ["recording", "recording"]
    assert server.count == 4

    PROMPT = "How warm is it in"
    for tid in (sync_tid, async_tid):
        result = orp.replay(tid, mode="deterministic")
        assert result.first_divergence.kind == "request" and result.first_divergence.step_index == 0
    assert server.count == 4


def test_a_call_outside_a_run_is_a_single_call_run(home: Path, server: FakeLLMServer) -> None:
    client = anthropic.Anthropic(base_url=BASE_URL, api_key="sk-ant-test", max_retries=0)
    with capture(home=home) as recorded:
        message = client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        with client.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "yo"}]) as s:
            text = "".join(s.text_stream)
    assert (message.content[0].text, text) == ("echo: hi", "echo: yo")
    runs = recorded.runs()
    assert [r.summary.agent for r in runs] == ["anthropic.messages"] * 2
    # spans the SDK itself emits (anthropic >= 2 traces its API calls) join each implicit run's trace
    assert {r.trace_id for r in recorded.records()} == {r.trace_id for r in runs}
    assert all([(s.kind, s.name) for s in r.steps] == [("model", "anthropic.messages")] for r in runs)


def test_sdk_errors_pass_through_unchanged_and_are_recorded(home: Path, server: FakeLLMServer) -> None:
    client = anthropic.Anthropic(base_url=BASE_URL, api_key="sk-ant-test", max_retries=0)
    with capture(home=home) as recorded, pytest.raises(anthropic.NotFoundError):
        client.messages.create(model=MISSING_MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])
    (run,) = recorded.runs()
    assert run.steps[0].status == "error" and run.steps[0].error["type"] == "anthropic.NotFoundError"


def test_uninstrument_restores_the_sdk(home: Path, server: FakeLLMServer) -> None:
    import anthropic.resources.messages.messages as module

    AnthropicInstrumentor().uninstrument()
    try:
        for owner in (module.Messages, module.AsyncMessages):
            assert not isinstance(vars(owner)["create"], PROXY) and not isinstance(vars(owner)["stream"], PROXY)
        client = anthropic.Anthropic(base_url=BASE_URL, api_key="sk-ant-test", max_retries=0)
        with capture(home=home) as recorded:
            client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])
        assert recorded.runs() == []
    finally:
        AnthropicInstrumentor().instrument()
