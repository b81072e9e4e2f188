"""The OpenAI instrumentor end to end: the real ``openai`` SDK against a local fake of its HTTP API.

Agents written on the plain SDK (no otel-replay code besides ``@orp.agent`` / ``@orp.tool``) are recorded into
a real embedded store, shown, and replayed in mock and deterministic mode while the fake server counts
requests: a replay must send none. A prompt changed between recording and replay is a ``request``
divergence at the model step it changed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import wrapt
from fake_llm_servers import MISSING_MODEL, TOOL_ARGS, FakeLLMServer

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.openai import OpenAIInstrumentor
from otel_replay.storage.store import Store
from otel_replay.testing import capture

PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)

TESTS_DIR = Path(__file__).resolve().parent
BASE_URL = ""
"""The fake server's URL; the agents read it at call time (a replay re-imports this module's agents)."""
PROMPT = "What is the weather in"
"""Flipped by a test between recording and replay: a changed prompt."""
RAW_FIRST = False
"""Set by a test between recording and replay: the agent first makes a ``with_streaming_response`` call."""
MODEL = "gpt-4o-mini"
SYSTEM = "You are a weather assistant. Use the tools."
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


@orp.tool
def get_weather(city: str) -> str:
    """The tool the model asks for."""
    return f"sunny in {city}"


@orp.agent("openai-sync-agent")
def sync_agent(city: str) -> str:
    """Chat Completions, sync: a tool call round trip, then a streamed final answer."""
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test-not-a-key", max_retries=0)
    if RAW_FIRST:
        with client.chat.completions.with_streaming_response.create(
            model=MODEL, messages=[{"role": "user", "content": "raw"}]
        ) as streaming:
            streaming.parse()
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"{PROMPT} {city}?"}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS, timeout=10)
    assert isinstance(first, openai.types.chat.ChatCompletion)
    call = first.choices[0].message.tool_calls[0]
    messages.append(first.choices[0].message)  # the SDK object itself, as many agents do
    messages.append(
        {"role": "tool", "tool_call_id": call.id, "content": get_weather(**json.loads(call.function.arguments))}
    )
    stream = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"x-request-id": os.urandom(4).hex()},
    )
    with stream:
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    # the SDK's stream helper (it calls create(stream=True) and wraps the stream in its own event API)
    with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "bye"}]) as helper:
        deltas = [event.delta for event in helper if event.type == "content.delta"]
        final = helper.get_final_completion()
    assert "".join(deltas) == final.choices[0].message.content == "echo: bye"
    return text


@orp.agent("openai-async-agent")
async def async_agent(city: str) -> dict[str, str]:
    """Async: a streamed chat tool call, a chat answer; then a Responses tool call and a streamed answer."""
    client = openai.AsyncOpenAI(base_url=BASE_URL, api_key="sk-test-not-a-key", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": f"{PROMPT} {city}?"}]
    stream = await client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True)
    assert isinstance(stream, openai.AsyncStream)
    name, arguments, call_id = "", "", None
    async for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or () if chunk.choices else ():
            call_id = call.id or call_id
            name += (call.function.name or "") if call.function else ""
            arguments += (call.function.arguments or "") if call.function else ""
    messages.append(
        {
            "role": "assistant",
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call_id, "content": get_weather(**json.loads(arguments))})
    chat = await client.chat.completions.create(model=MODEL, messages=messages)

    first = await client.responses.create(
        model=MODEL, instructions=SYSTEM, input=f"{PROMPT} {city}?", tools=RESPONSES_TOOLS
    )
    fc = first.output[0]
    items: list[Any] = [
        {"role": "user", "content": f"{PROMPT} {city}?"},
        fc.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": fc.call_id, "output": get_weather(**json.loads(fc.arguments))},
    ]
    text = ""
    async with await client.responses.create(model=MODEL, instructions=SYSTEM, input=items, stream=True) as events:
        async for event in events:
            if event.type == "response.output_text.delta":
                text += event.delta
    # the SDK's Responses stream helper (it calls create(stream=True))
    async with client.responses.stream(model=MODEL, input="bye") as helper:
        async for _ in helper:
            pass
        final = await helper.get_final_response()
    assert final.output_text == "echo: bye"
    return {"chat": chat.choices[0].message.content or "", "responses": text}


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    """The instrumentor on for this module, off afterwards."""
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A fresh fake server; the agents point at it."""
    global BASE_URL
    with FakeLLMServer() as fake:
        BASE_URL = fake.openai_url
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
    global PROMPT, RAW_FIRST
    assert sync_agent("Paris") == "The weather: sunny in Paris"
    assert asyncio.run(async_agent("Paris")) == {
        "chat": "The weather: sunny in Paris",
        "responses": "The weather: sunny in Paris",
    }
    assert server.count == 8
    orp.flush()
    with Store.open() as store:
        sync_tid, async_tid = _trace_id(store, "openai-sync-agent"), _trace_id(store, "openai-async-agent")
        run = store.load_run(sync_tid)
        arun = store.load_run(async_tid)

    # shown: model / tool steps with names, provider, model, usage and finish reasons
    assert [(s.kind, s.name) for s in run.steps] == [
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("model", "openai.chat.completions"),
        ("model", "openai.chat.completions"),
    ]
    first, _, last, helper = run.steps
    assert helper.snapshots["model"]["response"]["response"]["choices"][0]["message"]["content"] == "echo: bye"
    assert first.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    assert first.attributes[semconv.GEN_AI_REQUEST_MODEL] == MODEL
    assert first.attributes[semconv.GEN_AI_RESPONSE_MODEL] == MODEL
    assert (
        first.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS],
        first.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS],
    ) == ("13", "7")
    assert first.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["tool_calls"]'
    assert last.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == "15"  # from the streamed usage chunk
    assert last.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["stop"]'
    assert run.attributes[semconv.RUN_INPUT_TOKENS] == "28"  # the helper's stream asked for no usage
    assert semconv.GEN_AI_USAGE_INPUT_TOKENS not in helper.attributes
    request = first.snapshots["model"]["request"]
    assert set(request) == {"model", "messages", "tools"}  # timeout is transport, not request
    assert (
        first.snapshots["model"]["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"]
        == "get_weather"
    )
    context = first.snapshots["context"]
    assert context["system_rules"] == SYSTEM and context["history"][1]["content"] == "What is the weather in Paris?"
    assert last.snapshots["context"]["tool_results"] == [{"tool_call_id": "call_fake_1", "content": "sunny in Paris"}]
    streamed = last.snapshots["model"]["response"]
    assert (
        "".join(c["choices"][0]["delta"].get("content") or "" for c in streamed["chunks"] if c["choices"])
        == "The weather: sunny in Paris"
    )
    assert streamed["complete"] is True
    assert streamed["response"]["choices"][0]["message"]["content"] == "The weather: sunny in Paris"
    assert "extra_headers" not in last.snapshots["model"]["request"]

    assert [(s.kind, s.name) for s in arun.steps] == [
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("model", "openai.chat.completions"),
        ("model", "openai.responses"),
        ("tool", "get_weather"),
        ("model", "openai.responses"),
        ("model", "openai.responses"),
    ]
    tool_stream = arun.steps[0].snapshots["model"]["response"]["response"]
    assert tool_stream["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == json.dumps(TOOL_ARGS)
    assert arun.steps[3].attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == "14"
    assert arun.steps[3].attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == '["tool_calls"]'
    assert arun.steps[5].attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == "9"
    assert arun.steps[3].snapshots["context"]["system_rules"] == SYSTEM

    # replayed: the SDK objects come back from the recording, no request reaches the server
    for tid in (sync_tid, async_tid):
        for mode in ("mock", "deterministic"):
            result = orp.replay(tid, mode=mode)
            assert result.outcome == "matched", (mode, result.divergences)
            served = [s.attributes.get(semconv.REPLAY_SERVED) for s in result.replay.steps if s.kind == "model"]
            assert served and set(served) == {"recording"}
    assert server.count == 8

    # a changed prompt: the first model call's request differs from the recording
    PROMPT = "How warm is it in"
    result = orp.replay(sync_tid, mode="deterministic")
    assert result.first_divergence.kind == "request" and result.first_divergence.step_index == 0
    result = orp.replay(async_tid, mode="mock")  # mock answers anyway and reports every changed request
    assert [(d.kind, d.step_index) for d in result.divergences][:1] == [("request", 0)]
    assert ("request", 3) in [(d.kind, d.step_index) for d in result.divergences]
    assert server.count == 8

    # a streaming-response call cannot be answered from a recording: it stops the replay instead of going out
    RAW_FIRST = True
    try:
        result = orp.replay(sync_tid, mode="mock")
    finally:
        RAW_FIRST = False
    assert result.outcome == "diverged"
    assert any(d.kind == "unanswerable" and "with_streaming_response" in d.reason for d in result.divergences)
    assert server.count == 8


def test_a_call_outside_a_run_is_a_single_call_run(home: Path, server: FakeLLMServer) -> None:
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test-not-a-key", max_retries=0)
    with capture(home=home) as recorded:
        answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}])
        chunks = list(
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "again"}], stream=True)
        )
    assert answer.choices[0].message.content == "echo: hello"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "echo: again"
    runs = recorded.runs()
    assert [r.summary.agent for r in runs] == ["openai.chat.completions"] * 2
    assert [[(s.kind, s.name, s.index) for s in r.steps] for r in runs] == [
        [("model", "openai.chat.completions", 0)]
    ] * 2
    assert runs[0].snapshots["output"]["structured"]["choices"][0]["message"]["content"] == "echo: hello"


def test_sdk_errors_pass_through_unchanged_and_are_recorded(home: Path, server: FakeLLMServer) -> None:
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test", max_retries=0)
    with capture(home=home) as recorded, pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model=MISSING_MODEL, messages=[{"role": "user", "content": "x"}])
    (run,) = recorded.runs()
    assert run.steps[0].status == "error" and run.steps[0].error["type"] == "openai.NotFoundError"


def test_suppressed_instrumentation_and_uninstrument_record_nothing(home: Path, server: FakeLLMServer) -> None:
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test", max_retries=0)
    raw = client.chat.completions.with_raw_response  # cached by the SDK, with ``create`` bound while wrapped
    with capture(home=home) as recorded:
        with suppress_instrumentation():
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "quiet"}])
        OpenAIInstrumentor().uninstrument()
        try:
            assert not isinstance(vars(openai.resources.chat.completions.Completions)["create"], PROXY)
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "plain"}])
            raw.create(model=MODEL, messages=[{"role": "user", "content": "raw, bound before"}]).parse()
        finally:
            OpenAIInstrumentor().instrument()
    assert recorded.runs() == []
    assert server.count == 3


def test_a_method_bound_before_uninstrumenting_records_again_once_instrumented_again(
    home: Path, server: FakeLLMServer
) -> None:
    """A replay instruments and uninstruments; the SDK's cached raw-response method must follow both ways."""
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test", max_retries=0)
    raw = client.chat.completions.with_raw_response  # cached, ``create`` bound while wrapped
    OpenAIInstrumentor().uninstrument()
    OpenAIInstrumentor().instrument()
    with capture(home=home) as recorded:
        raw.create(model=MODEL, messages=[{"role": "user", "content": "bound before"}]).parse()
    (run,) = recorded.runs()
    assert [step.kind for step in run.steps] == ["model"]


def test_a_bookkeeping_failure_never_reaches_the_agent(
    home: Path, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_replay.instrumentation import _sdk_plan

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bookkeeping bug")

    monkeypatch.setattr(_sdk_plan, "request_of", broken)  # where a call's recording begins
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test", max_retries=0)
    answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "still works"}])
    assert answer.choices[0].message.content == "echo: still works"


def test_a_failure_reading_finish_reasons_still_ends_the_step(
    home: Path, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_replay.instrumentation import _sdk_plan

    def broken(value: Any) -> bool:
        raise RuntimeError("odd response")

    monkeypatch.setattr(_sdk_plan, "is_stream_envelope", broken)  # the first thing finishing a step looks at
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test", max_retries=0)

    @orp.agent("finish-agent")
    def finish_agent() -> str:
        answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        return answer.choices[0].message.content or ""

    with capture(home=home) as recorded:
        assert finish_agent() == "echo: hi"
    (run,) = recorded.runs()
    (step,) = run.steps
    assert step.kind == "model" and step.status == "ok" and step.snapshots.get("model")


def test_contrib_openai_v2_and_otel_replay_on_the_same_sdk(tmp_path: Path) -> None:
    """A trace from opentelemetry-instrumentation-openai-v2 running for real next to ours, in its own process."""
    import opentelemetry.instrumentation.openai_v2  # noqa: F401 - the script below runs it

    script = tmp_path / "both.py"
    script.write_text(textwrap.dedent(_CONTRIB_SCRIPT))
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(TESTS_DIR),
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    env.pop("OTEL_REPLAY_STORE", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["answer"] == "The weather: sunny in Paris"
    # theirs: one GenAI span per SDK call, in the run's trace: the plain call's inside our step for it, the
    # streamed call's beside it (a stream's HTTP call runs in the caller's context)
    assert len(out["contrib"]) == 3
    assert out["contrib"][0]["parent"] == out["step_span_ids"][0]
    assert out["contrib"][1]["parent"] == out["contrib"][2]["parent"] == out["root_span_id"]
    assert {c["trace_id"] for c in out["contrib"]} == {out["trace_id"]}
    assert out["contrib"][0]["input_tokens"] == 13
    # ours: one model step per call, tokens counted once in the run
    assert out["steps"] == [
        ["model", "openai.chat.completions"],
        ["tool", "get_weather"],
        ["model", "openai.chat.completions"],
        ["model", "openai.chat.completions"],
    ]
    assert out["run_input_tokens"] == "28"
    # a replay with both instrumentors active is answered from the recording, no request, no contrib span
    assert out["replay_outcome"] == "matched" and out["requests_after_replay"] == out["requests_before_replay"] == 3
    assert out["contrib_spans_after_replay"] == 3
    # uninstrumenting ours leaves theirs working, and the reverse
    assert out["after_uninstrument_ours"] == {"contrib_spans": 4, "steps": 0}
    assert out["after_splice"] == {"contrib_spans": 1, "steps": 0}


_CONTRIB_SCRIPT = """
    import json
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)

    import openai
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as ContribInstrumentor
    import otel_replay as orp
    from otel_replay.instrumentation.openai import OpenAIInstrumentor
    from otel_replay.storage.store import Store
    from fake_llm_servers import FakeLLMServer
    import test_instrument_openai as t

    orp.configure(exporter="spool")          # attaches to the provider above
    ContribInstrumentor().instrument()
    OpenAIInstrumentor().instrument()        # wraps after theirs: ours is the outer wrapper
    server = FakeLLMServer()
    t.BASE_URL = server.openai_url
    answer = t.sync_agent("Paris")
    spans = memory.get_finished_spans()
    contrib = [s for s in spans if s.instrumentation_scope.name != "otel_replay"]
    steps = [s for s in spans if "otel_replay.step.index" in (s.attributes or {})]
    root = next(s for s in spans if "otel_replay.run.id" in (s.attributes or {}))
    out = {
        "answer": answer,
        "trace_id": format(root.context.trace_id, "032x"),
        "root_span_id": format(root.context.span_id, "016x"),
        "contrib": [{"name": s.name, "parent": format(s.parent.span_id, "016x") if s.parent else None,
                     "trace_id": format(s.context.trace_id, "032x"),
                     "input_tokens": s.attributes.get("gen_ai.usage.input_tokens")} for s in contrib],
        "step_span_ids": [format(s.context.span_id, "016x") for s in steps],
        "steps": [[s.attributes["otel_replay.step.kind"], s.attributes["otel_replay.step.name"]]
                  for s in sorted(steps, key=lambda s: s.attributes["otel_replay.step.index"])],
        "run_input_tokens": str(root.attributes.get("otel_replay.run.input_tokens")),
        "requests_before_replay": server.count,
    }
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="openai-sync-agent", kind="original")
    before = len(memory.get_finished_spans())
    result = orp.replay(summary.trace_id, mode="deterministic")
    out["replay_outcome"] = result.outcome
    out["requests_after_replay"] = server.count
    new = memory.get_finished_spans()[before:]
    out["contrib_spans_after_replay"] = len(contrib) + len(
        [s for s in new if s.instrumentation_scope.name != "otel_replay"])
    OpenAIInstrumentor().uninstrument()
    before = len(memory.get_finished_spans())
    client = openai.OpenAI(base_url=server.openai_url, api_key="sk-test", max_retries=0)
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    new = memory.get_finished_spans()[before:]
    out["after_uninstrument_ours"] = {
        "contrib_spans": len(contrib) + len([s for s in new if s.instrumentation_scope.name != "otel_replay"]),
        "steps": len([s for s in new if "otel_replay.step.index" in (s.attributes or {})])}
    # ours inner, theirs outer: uninstrumenting ours splices it out from under theirs
    ContribInstrumentor().uninstrument()
    OpenAIInstrumentor().instrument()
    ContribInstrumentor().instrument()
    OpenAIInstrumentor().uninstrument()
    before = len(memory.get_finished_spans())
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    new = memory.get_finished_spans()[before:]
    out["after_splice"] = {
        "contrib_spans": len([s for s in new if s.instrumentation_scope.name != "otel_replay"]),
        "steps": len([s for s in new if s.instrumentation_scope.name == "otel_replay"])}
    print(json.dumps(out))
"""


def test_raw_response_calls_are_recorded_and_streaming_response_calls_go_through(
    home: Path, server: FakeLLMServer
) -> None:
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test", max_retries=0)
    with capture(home=home) as recorded:
        raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": "r"}])
        with client.chat.completions.with_streaming_response.create(
            model=MODEL, messages=[{"role": "user", "content": "s"}]
        ) as streaming:
            assert streaming.parse().choices[0].message.content == "echo: s"
    assert raw.http_request.method == "POST" and raw.parse().choices[0].message.content == "echo: r"
    (run,) = recorded.runs()  # the raw-response call is a single-call run; the streaming response is not recorded
    assert run.steps[0].snapshots["model"]["response"]["choices"][0]["message"]["content"] == "echo: r"
