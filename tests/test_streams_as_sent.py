"""Streams are recorded as the API sent them, whatever the consumer does to the chunk objects afterwards.

Consumers change stream chunks in place: LlamaIndex's OpenAI LLM appends each tool-call argument fragment onto
the first chunk's tool call. The real ``openai`` and ``anthropic`` SDKs stream from the local fake server (Chat
Completions, Responses and Messages, sync and async, a text or a tool call); after every ``next()`` the
consumer changes chunks it has received (strings appended to or replaced, lists cleared or grown, dicts
grown, numbers and flags changed), chosen by Hypothesis. The recorded chunks must equal the server-sent events
the fake server wrote, and a mock replay of such a run must yield chunks equal to them too (each replayed call
gets fresh objects, so the consumer's changes never reach the recording the replay compares with).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pydantic
import pytest
from fake_llm_servers import TOOL_ARGS, FakeLLMServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

import otel_replay as orp
from otel_replay.instrumentation._sdk import plain
from otel_replay.instrumentation.anthropic import AnthropicInstrumentor
from otel_replay.instrumentation.openai import OpenAIInstrumentor
from otel_replay.storage.store import Store
from otel_replay.testing import capture

APIS = ("chat", "responses", "messages")
BASE_URLS: dict[str, str] = {}
"""The fake server's URLs; the agent reads them at call time (a replay calls it again)."""
PLAN: list[list[tuple[int, int, int]]] = []
"""The consumer's changes: after the i-th ``next()``, ``PLAN[i % len(PLAN)]`` as (chunk, slot, operation)."""
seen: list[Any] = []
"""The chunks the agent received, as plain data taken before it changed them."""

Mutation = tuple[int, int, int]


class WireServer(FakeLLMServer):
    """The fake server, keeping the JSON of every stream's server-sent events (``[DONE]`` left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.wire: list[list[Any]] = []

    def _tap(self, h: Any) -> Any:
        server = self

        class Tap:
            def send_json(self, status: int, payload: Any) -> None:
                h.send_json(status, payload)

            def send_events(self, frames: list[tuple[str | None, Any]]) -> None:
                server.wire.append([json.loads(json.dumps(data)) for _, data in frames if data != "[DONE]"])
                h.send_events(frames)

        return Tap()

    def answer_chat(self, h: Any, body: dict[str, Any]) -> None:
        super().answer_chat(self._tap(h), body)

    def answer_responses(self, h: Any, body: dict[str, Any]) -> None:
        super().answer_responses(self._tap(h), body)

    def answer_messages(self, h: Any, body: dict[str, Any]) -> None:
        super().answer_messages(self._tap(h), body)


# ------------------------------------------------------------------------------------- the consumer


def _slots(obj: Any, out: list[tuple[Any, Any, Any]], depth: int = 0) -> None:
    """Every (holder, attribute or key, value) reachable from a chunk object, depth first."""
    if depth > 8:
        return
    if isinstance(obj, pydantic.BaseModel):
        items: Any = list(vars(obj).items())
    elif isinstance(obj, list):
        items = list(enumerate(obj))
    elif isinstance(obj, dict):
        items = list(obj.items())
    else:
        return
    for key, value in items:
        out.append((obj, key, value))
        _slots(value, out, depth + 1)


def _mutate(obj: Any, pick: int, op: int) -> None:
    """Change one value inside a chunk object in place, as a consumer might."""
    slots: list[tuple[Any, Any, Any]] = []
    _slots(obj, slots)
    if not slots:
        return
    holder, key, value = slots[pick % len(slots)]
    if isinstance(value, list):
        if op % 2:
            value.clear()
        else:
            value.append(value[0] if value else "grown")
        return
    if isinstance(value, dict):
        value[f"mutated-{op}"] = op
        return
    if isinstance(value, str):
        new: Any = (value + '{"city": "Paris"}', "", "mutated-id", value * 2)[op % 4]
    elif isinstance(value, bool):
        new = not value
    elif isinstance(value, int):
        new = value + 1 + op
    else:
        new = ("mutated", [], {}, 0)[op % 4]
    if isinstance(holder, pydantic.BaseModel):
        setattr(holder, key, new)
    else:
        holder[key] = new


def _consume(chunk: Any, received: list[Any], plan: list[list[Mutation]]) -> None:
    seen.append(plain(chunk))
    received.append(chunk)
    for which, pick, op in plan[(len(received) - 1) % len(plan)] if plan else ():
        _mutate(received[which % len(received)], pick, op)


def _request(api: str, tools: bool) -> dict[str, Any]:
    text = "What is the weather in Paris?"
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    if api == "chat":
        spec = [{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]
        request: dict[str, Any] = {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": text}],
            "stream_options": {"include_usage": True},
        }
    elif api == "responses":
        spec = [{"type": "function", "name": "get_weather", "parameters": schema}]
        request = {"model": "gpt-4o-mini", "input": text}
    else:
        spec = [{"name": "get_weather", "input_schema": schema}]
        request = {"model": "claude-fake-1", "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
    if tools:
        request["tools"] = spec
    return request


def _sync_stream(api: str, request: dict[str, Any]) -> Any:
    if api == "messages":
        client: Any = anthropic.Anthropic(base_url=BASE_URLS["anthropic"], api_key="sk-test", max_retries=0)
        return client.messages.create(stream=True, **request)
    client = openai.OpenAI(base_url=BASE_URLS["openai"], api_key="sk-test", max_retries=0)
    method = client.chat.completions.create if api == "chat" else client.responses.create
    return method(stream=True, **request)


async def _async_stream(api: str, request: dict[str, Any]) -> Any:
    if api == "messages":
        client: Any = anthropic.AsyncAnthropic(base_url=BASE_URLS["anthropic"], api_key="sk-test", max_retries=0)
        return await client.messages.create(stream=True, **request)
    client = openai.AsyncOpenAI(base_url=BASE_URLS["openai"], api_key="sk-test", max_retries=0)
    method = client.chat.completions.create if api == "chat" else client.responses.create
    return await method(stream=True, **request)


def consume(api: str, tools: bool, is_async: bool, plan: list[list[Mutation]]) -> int:
    """One streamed call, read to its end, its chunks changed after every ``next()``; the chunk count."""
    request = _request(api, tools)
    received: list[Any] = []
    if not is_async:
        stream = _sync_stream(api, request)
        while True:
            try:
                chunk = next(stream)
            except StopIteration:
                break
            _consume(chunk, received, plan)
        return len(received)

    async def main() -> int:
        stream = await _async_stream(api, request)
        while True:
            try:
                chunk = await stream.__anext__()
            except StopAsyncIteration:
                break
            _consume(chunk, received, plan)
        return len(received)

    return asyncio.run(main())


@orp.agent("stream-mutating-agent")
def mutating_agent(api: str, tools: bool, is_async: bool) -> int:
    """The consumer as an agent, so a replay can run it again."""
    return consume(api, tools, is_async, PLAN)


# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    """Both SDK instrumentors on for this module, off afterwards."""
    instrumentors = [OpenAIInstrumentor(), AnthropicInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    """One fake server for the module; the agent points at it."""
    with WireServer() as fake:
        BASE_URLS.update(openai=fake.openai_url, anthropic=fake.anthropic_url)
        yield fake


@pytest.fixture(scope="module")
def capture_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("streams-as-sent")


@pytest.fixture
def plan() -> Iterator[None]:
    """The agent changes every chunk it has received after each ``next()``; no changes after the test."""
    PLAN[:] = EVERYTHING
    yield
    PLAN.clear()


def _recorded_chunks(run: Any) -> list[Any]:
    (step,) = [s for s in run.steps if s.kind == "model"]
    response = step.snapshots["model"]["response"]
    assert response["complete"] is True
    chunks: list[Any] = response["chunks"]
    return chunks


# ---------------------------------------------------------------------------------------------- tests

mutations = st.lists(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 200), st.integers(0, 7)), max_size=4),
    min_size=1,
    max_size=12,
)


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    api=st.sampled_from(APIS),
    tools=st.booleans(),
    is_async=st.booleans(),
    plan=mutations,
)
def test_recorded_chunks_equal_the_wire_whatever_the_consumer_does(
    server: WireServer, capture_home: Path, api: str, tools: bool, is_async: bool, plan: list[list[Mutation]]
) -> None:
    seen.clear()
    with capture(home=capture_home) as recorded:
        count = consume(api, tools, is_async, plan)
    wire = server.wire[-1]
    assert count == len(wire)
    assert seen == wire  # the SDK yields what was sent: the oracle holds
    (run,) = recorded.runs()
    assert _recorded_chunks(run) == wire


def test_the_llamaindex_pattern_is_recorded_as_sent(server: WireServer, capture_home: Path) -> None:
    """The issue's case: every argument fragment appended onto the first tool-call chunk's arguments."""
    client = openai.OpenAI(base_url=BASE_URLS["openai"], api_key="sk-test", max_retries=0)
    first_call = None
    with capture(home=capture_home) as recorded:
        for chunk in client.chat.completions.create(stream=True, **_request("chat", True)):
            for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                if first_call is None:
                    first_call = call
                elif call.function and call.function.arguments:
                    first_call.function.arguments += call.function.arguments
    assert first_call is not None and first_call.function.arguments == json.dumps(TOOL_ARGS)
    (run,) = recorded.runs()
    chunks = _recorded_chunks(run)
    assert chunks == server.wire[-1]
    step = run.steps[0].snapshots["model"]["response"]
    assert step["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == json.dumps(TOOL_ARGS)


# Every chunk received so far changed after each next(): the first ones again and again (as LlamaIndex does).
EVERYTHING = [[(which, pick, op) for which in (0, 1, 2) for pick, op in ((0, 0), (3, 1), (7, 2), (12, 3), (20, 4))]]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("api", APIS)
def test_a_mock_replay_yields_the_wire_chunks(
    home: Path, server: WireServer, api: str, is_async: bool, plan: None
) -> None:
    seen.clear()
    mutating_agent(api, True, is_async)
    wire = server.wire[-1]
    assert seen == wire
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="stream-mutating-agent", kind="original")
        assert _recorded_chunks(store.load_run(summary.trace_id)) == wire
    sent = server.count
    for mode in ("mock", "deterministic"):
        seen.clear()
        result = orp.replay(summary.trace_id, mode=mode)
        assert result.outcome == "matched", (mode, result.divergences)
        assert seen == wire, mode  # fresh objects each time: the changes of one pass never reach the next
    assert server.count == sent


def test_replayed_chunks_are_fresh_objects_and_leave_the_recording_alone() -> None:
    """The SDKs' lenient constructors keep fields they do not know (a newer API's) as the very values given:
    a replayed chunk is built from a copy, so changing it in place changes neither the recorded chunk nor
    the next replay's."""
    from otel_replay.instrumentation import _sdk_plan
    from otel_replay.instrumentation import openai as openai_instrumentation

    api = openai_instrumentation.sdk_api("chat", capture_context=False)
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}],
        "x_newer_field": {"parts": ["a"]},
    }
    envelope = {"otel_replay.stream": 1, "chunks": [chunk], "complete": True, "response": None}
    before = json.loads(json.dumps(envelope))
    for _ in range(2):
        stream = _sdk_plan.Plan(api, stream=True).answer(envelope, async_=False)
        (got,) = list(stream)
        assert plain(got) == before["chunks"][0]
        got.x_newer_field["parts"].append("b")
        got.choices[0].delta.content += "!"
    assert envelope == before


@pytest.mark.parametrize("is_async", [False, True], ids=["stream", "astream"])
def test_a_langchain_stream_is_recorded_as_the_model_yielded_it(
    server: WireServer, capture_home: Path, is_async: bool
) -> None:
    """LangChain's chat model step merges the streamed chunks when the stream ends (``stream`` and ``astream``):
    from copies taken as they were yielded, not the objects the consumer went on to change."""
    from langchain_openai import ChatOpenAI

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": schema}}
    orp.instrument("langchain")
    try:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=BASE_URLS["openai"], api_key="sk-test", max_retries=0, streaming=True
        ).bind_tools([tool])
        first = None

        def consume(chunk: Any) -> None:  # as LlamaIndex does: the tool arguments appended onto the first chunk
            nonlocal first
            if first is None and chunk.tool_call_chunks:
                first = chunk
            elif first is not None:
                for part in chunk.tool_call_chunks:
                    first.tool_call_chunks[0]["args"] += part["args"] or ""
            chunk.content = str(chunk.content) + "~"
            chunk.response_metadata.clear()

        async def consume_async() -> None:
            async for chunk in model.astream("What is the weather in Paris?"):
                consume(chunk)

        with capture(home=capture_home) as recorded:
            if is_async:
                asyncio.run(consume_async())
            else:
                for chunk in model.stream("What is the weather in Paris?"):
                    consume(chunk)
    finally:
        orp.uninstrument("langchain")
    assert first is not None and first.tool_call_chunks[0]["args"] == json.dumps(TOOL_ARGS)  # changed in place
    (run,) = recorded.runs()
    (step,) = [s for s in run.steps if s.kind == "model"]
    (generation,) = step.snapshots["model"]["response"]["generations"]
    message = generation["message"]["data"]
    assert message["content"] == ""
    assert [(c["name"], c["args"]) for c in message["tool_calls"]] == [("get_weather", TOOL_ARGS)]
    assert step.snapshots["model"]["response"]["finish_reason"] == "tool_calls"


def _change_helper_event(event: Any, n: int) -> None:
    """Change what a stream helper's event hands over from the raw stream: the chat chunk, a Responses delta,
    an Anthropic raw event (the helpers' own snapshots are theirs to keep consistent)."""
    if getattr(event, "chunk", None) is not None:
        _mutate(event.chunk, n, n)
    elif str(getattr(event, "type", "")).endswith(".delta") and isinstance(getattr(event, "delta", None), str):
        event.delta += '"}{'
    elif getattr(event, "type", None) in ("message_start", "content_block_start", "content_block_delta"):
        _mutate(event, n, n)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("api", APIS)
def test_stream_helpers_record_the_wire(server: WireServer, capture_home: Path, api: str, is_async: bool) -> None:
    """``chat.completions.stream``, ``responses.stream`` and ``messages.stream`` (sync and async clients) read the
    same recorded stream: what the consumer does to the events they hand over does not reach the recording
    either."""
    request = _request(api, True)
    if api == "chat":
        request.pop("stream_options")
        for tool in request["tools"]:  # the helper parses tool calls, and only those of strict tools
            tool["function"]["strict"] = True
            tool["function"]["parameters"] = {**tool["function"]["parameters"], "additionalProperties": False}

    def helper_of(client: Any) -> Any:
        if api == "messages":
            return client.messages.stream(**request)
        return client.chat.completions.stream(**request) if api == "chat" else client.responses.stream(**request)

    async def consume_async() -> None:
        if api == "messages":
            client: Any = anthropic.AsyncAnthropic(base_url=BASE_URLS["anthropic"], api_key="sk-test", max_retries=0)
        else:
            client = openai.AsyncOpenAI(base_url=BASE_URLS["openai"], api_key="sk-test", max_retries=0)
        async with helper_of(client) as events:
            n = 0
            async for event in events:
                _change_helper_event(event, n)
                n += 1

    with capture(home=capture_home) as recorded:
        if is_async:
            asyncio.run(consume_async())
        else:
            if api == "messages":
                client: Any = anthropic.Anthropic(base_url=BASE_URLS["anthropic"], api_key="sk-test", max_retries=0)
            else:
                client = openai.OpenAI(base_url=BASE_URLS["openai"], api_key="sk-test", max_retries=0)
            with helper_of(client) as events:
                for n, event in enumerate(events):
                    _change_helper_event(event, n)
    (run,) = recorded.runs()
    assert _recorded_chunks(run) == server.wire[-1]
