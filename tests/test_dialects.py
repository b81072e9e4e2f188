"""Runs recorded by other GenAI instrumentations are read into runs: listed, shown, dry-replayed and diffed.

Real traces: ``opentelemetry-instrumentation-openai-v2`` (with ``opentelemetry-util-genai`` for the agent and
tool spans) and OpenInference's OpenAI instrumentor run for real in a subprocess (their instrumentors set up
their own tracer provider) against a fake OpenAI chat-completions server on 127.0.0.1 that this test module
serves. The subprocess captures the spans with the SDK's in-memory exporter and writes them as one OTLP
protobuf request; the test turns it into rows with otel-replay's own mapping and inserts them into a real
embedded store. OpenLLMetry / Traceloop keys and the legacy ``gen_ai.prompt.N`` keys are covered by
hand-written span attribute sets, as :class:`SpanRecord` objects (the form the store returns).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import otel_replay as orp
from otel_replay import dialects, semconv
from otel_replay.errors import OtelReplayError
from otel_replay.exporting.rows import records_from_request
from otel_replay.records import EventRecord, SpanRecord
from otel_replay.replay.diff import diff_runs
from otel_replay.replay.engine import readiness, replay
from otel_replay.runs import build_run
from otel_replay.snapshots import canonical_json, sha256_hex, to_jsonable
from otel_replay.storage.store import Store

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look an order up.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
SYSTEM = "You are a support agent."
CHAT = "openai.chat.completions"
"""Model step name of an OpenAI chat call, whoever recorded it (see ``dialects.SDK_STEP_NAMES``)."""


# ------------------------------------------------------------------------------------ fake OpenAI server


class _FakeOpenAI(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: a tool call first when tools are offered, then a text answer."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        messages = body.get("messages", [])
        if body.get("tools") and not any(m.get("role") == "tool" for m in messages):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": '{"order_id": "2077"}'},
                    }
                ],
            }
            reason = "tool_calls"
        else:
            asked = [m.get("content") for m in messages if m.get("role") == "user"][-1]
            message = {"role": "assistant", "content": f"Done: {asked}"}
            reason = "stop"
        data = json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1700000000,
                "model": body.get("model", "") + "-2024-07-18",
                "choices": [{"index": 0, "message": message, "finish_reason": reason}],
                "usage": {
                    "prompt_tokens": 11 + len(messages),
                    "completion_tokens": 7,
                    "total_tokens": 18 + len(messages),
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


# ---------------------------------------------------------------------- the instrumented agent (subprocess)

PRODUCER = rf"""
import json, sys
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

which, port, out, questions = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
TOOLS = json.loads({json.dumps(TOOLS)!r})
SYSTEM = {SYSTEM!r}
exporter = InMemorySpanExporter()

def lookup_order(order_id):
    return {{"order_id": order_id, "status": "delivered"}}

def drop_none(value):
    if isinstance(value, dict):
        return {{k: drop_none(v) for k, v in value.items() if v is not None}}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value

def agent_body(client, question, tool):
    messages = [{{"role": "system", "content": SYSTEM}}, {{"role": "user", "content": question}}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0.2, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    result = tool(call.id, **json.loads(call.function.arguments))
    messages = messages + [drop_none(first.choices[0].message.model_dump()),
                           {{"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}}]
    second = client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0.2, tools=TOOLS)
    return second.choices[0].message.content

import openai

if which == "genai":
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.util.genai.handler import get_telemetry_handler
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    handler = get_telemetry_handler(tracer_provider=provider)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{{port}}/v1", api_key="sk-test")

    def tool(call_id, **arguments):
        with handler.tool("lookup_order", tool_call_id=call_id, tool_type="function") as invocation:
            result = lookup_order(**arguments)
            if invocation.should_capture_content_on_span:
                invocation.arguments = arguments
                invocation.tool_result = result
            return result

    for question in questions:
        with handler.invoke_local_agent(agent_name="support", request_model="gpt-4o-mini") as run:
            run.input_messages = [InputMessage(role="user", parts=[Text(content=question)])]
            answer = agent_body(client, question, tool)
            run.output_messages = [OutputMessage(role="assistant", parts=[Text(content=answer)],
                                                 finish_reason="stop")]
else:
    from openinference.instrumentation import TracerProvider
    from openinference.instrumentation.openai import OpenAIInstrumentor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("support")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{{port}}/v1", api_key="sk-test")
    traced_lookup = tracer.tool(name="lookup_order")(lookup_order)

    @tracer.agent(name="support")
    def support(question):
        return agent_body(client, question, lambda call_id, **arguments: traced_lookup(**arguments))

    for question in questions:
        support(question)

provider.force_flush()
with open(out, "wb") as f:
    f.write(encode_spans(exporter.get_finished_spans()).SerializeToString())
"""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[SpanRecord]]:
    """Spans of real runs, by producer: ``genai`` (content on the spans), ``genai-no-content``, ``openinference``
    (two runs, two questions). The producers run in parallel subprocesses against one fake server."""
    # the producers' packages, all of the [test] extra: the subprocesses below run them
    import openai  # noqa: F401
    import openinference.instrumentation.openai  # noqa: F401
    import opentelemetry.instrumentation.openai_v2
    import opentelemetry.util.genai.handler  # noqa: F401

    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = tmp_path_factory.mktemp("dialects")
    jobs = {
        "genai": ("genai", "SPAN_ONLY", ["Please refund order 2077."]),
        "genai-no-content": ("genai", "NO_CONTENT", ["Please refund order 2077."]),
        "openinference": ("openinference", "", ["Please refund order 2077.", "Where is order 2077?"]),
    }
    procs = {}
    try:
        for key, (which, capture, questions) in jobs.items():
            env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
            env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
            if capture:
                env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
            procs[key] = subprocess.Popen(
                [sys.executable, "-c", PRODUCER, which, str(server.server_port), str(base / key), *questions],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        out: dict[str, list[SpanRecord]] = {}
        for key, proc in procs.items():
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
            out[key] = records_from_request((base / key).read_bytes())
        return out
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def store(home: Path, traces: dict[str, list[SpanRecord]]) -> Iterator[Store]:
    """A fresh embedded store holding every produced trace."""
    with Store.open() as opened:
        for records in traces.values():
            opened.insert_spans(records)
        yield opened


def _trace_ids(records: list[SpanRecord]) -> list[str]:
    roots = sorted((r for r in records if not r.parent_span_id), key=lambda r: r.timestamp_ns)
    return [r.trace_id for r in roots]


def _request_hash(request: dict[str, Any]) -> str:
    """The request hash otel-replay's recorder computes for a model call with these named arguments."""
    return sha256_hex(canonical_json(to_jsonable(request)))


# ------------------------------------------------------------------------------------- real traces


def test_runs_lists_roots_of_foreign_runs(store: Store, traces: dict[str, list[SpanRecord]]) -> None:
    summaries = {s.trace_id: s for s in store.runs(limit=100)}
    expected = {tid: key for key, records in traces.items() for tid in _trace_ids(records)}
    assert set(expected) <= set(summaries)
    for tid, key in expected.items():
        summary = summaries[tid]
        assert summary.kind == "original"
        assert summary.agent == "support"
        assert summary.dialect == ("openinference" if key == "openinference" else "genai")
        assert summary.status == "ok"
        assert summary.run_id == ""
    assert {s.trace_id for s in store.runs(kind="original", agent="support", limit=100)} >= set(expected)
    assert not [s for s in store.runs(kind="replay", limit=100) if s.trace_id in expected]


def test_genai_run_with_content(store: Store, traces: dict[str, list[SpanRecord]]) -> None:
    (tid,) = _trace_ids(traces["genai"])
    run = store.load_run(tid)
    assert run.dialect == "genai" and run.to_dict()["dialect"] == "genai"
    assert [(s.index, s.kind, s.name) for s in run.steps] == [
        (0, "model", CHAT),
        (1, "tool", "lookup_order"),
        (2, "model", CHAT),
    ]
    assert run.problems == ()
    first = run.steps[0].snapshots["model"]
    assert first["content_captured"] is True and first["request_exact"] is False
    assert first["request"]["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Please refund order 2077."},
    ]
    assert first["request"]["model"] == "gpt-4o-mini" and first["request"]["temperature"] == 0.2
    assert first["provider"] == "openai"
    assert first["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert first["response"]["choices"][0]["finish_reason"] == "tool_calls"
    assert first["usage"] == {"input_tokens": 13, "output_tokens": 7}
    attrs = run.steps[0].attributes
    assert attrs[semconv.MODEL_REQUEST_HASH] == first["request_hash"] == _request_hash(first["request"])
    second = run.steps[2].snapshots["model"]
    assert [m["role"] for m in second["request"]["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["request"]["messages"][3]["tool_call_id"] == "call_abc"
    assert second["response"]["choices"][0]["message"]["content"].startswith("Done: ")
    tool = run.steps[1].snapshots["tool"]
    assert tool["arguments"] == {"order_id": "2077"}
    assert tool["result"] == {"order_id": "2077", "status": "delivered"}
    assert tool["call_id"] == "call_abc" and tool["risk"] == "read"
    assert run.steps[1].attributes[semconv.TOOL_ARGS_HASH] == sha256_hex(canonical_json({"order_id": "2077"}))
    assert run.snapshots["input"]["args"] == ["Please refund order 2077."]
    assert run.snapshots["output"]["answer"] == second["response"]["choices"][0]["message"]["content"]
    assert [s.kind for s in run.timeline] == ["input", "model", "tool", "model", "output"]
    assert [s.seq for s in run.timeline] == [0, 1, 2, 3, 4]

    report = readiness(run)
    assert report["integrity"]["ok"] is True
    assert report["modes"]["mock"]["ready"] is False  # no entrypoint: another instrumentation recorded it
    assert not [m for m in report["modes"]["deterministic"]["missing"] if "without its request content" in m]


def test_genai_run_without_content_says_so(store: Store, traces: dict[str, list[SpanRecord]]) -> None:
    (tid,) = _trace_ids(traces["genai-no-content"])
    run = store.load_run(tid)
    assert [s.kind for s in run.steps] == ["model", "tool", "model"]
    model = run.steps[0].snapshots["model"]
    assert model["content_captured"] is False and model["request"] == {} and model["request_hash"] == ""
    assert model["response"] is None and model["response_captured"] is False
    assert model["usage"] == {"input_tokens": 13, "output_tokens": 7}
    assert model["parameters"] == {"temperature": 0.2}
    assert semconv.MODEL_REQUEST_HASH not in run.steps[0].attributes
    assert run.steps[1].snapshots["tool"]["content_captured"] is False
    assert "input" not in run.snapshots

    result = replay(tid, mode="dry", store=store)
    missing = result.readiness["modes"]["deterministic"]["missing"]
    assert result.outcome == "matched" and result.readiness["integrity"]["ok"]
    assert "model step 0 was recorded without its request content" in missing
    assert "model step 2 was recorded without its request content" in missing


def test_openinference_run_and_request_hash(store: Store, traces: dict[str, list[SpanRecord]]) -> None:
    tid, _ = _trace_ids(traces["openinference"])
    run = store.load_run(tid)
    assert run.dialect == "openinference" and run.agent == "support"
    assert [(s.kind, s.name) for s in run.steps] == [("model", CHAT), ("tool", "lookup_order"), ("model", CHAT)]
    model = run.steps[0].snapshots["model"]
    request = {
        "model": "gpt-4o-mini",
        "temperature": 0.2,
        "tools": TOOLS,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Please refund order 2077."}],
    }
    assert model["request_exact"] is True and model["request"] == request
    # the same hash otel-replay's recorder gives a model call made with the SDK call's arguments
    assert run.steps[0].attributes[semconv.MODEL_REQUEST_HASH] == _request_hash(request)
    assert model["response_exact"] is True and model["response"]["object"] == "chat.completion"
    assert run.steps[1].snapshots["tool"]["result"] == {"order_id": "2077", "status": "delivered"}
    assert run.snapshots["input"]["args"] == ["Please refund order 2077."]
    assert run.snapshots["output"]["answer"].startswith("Done: ")


def test_dry_replay_and_diff_of_foreign_runs(store: Store, traces: dict[str, list[SpanRecord]]) -> None:
    a, b = _trace_ids(traces["openinference"])
    result = replay(a, mode="dry", store=store)
    assert result.outcome == "matched" and result.readiness is not None
    assert result.readiness["integrity"]["ok"] is True
    assert result.readiness["dangling_tool_calls"] == []
    assert "no entrypoint recorded: pass --app module:function" in result.readiness["modes"]["mock"]["missing"]
    # --app given: the entrypoint is there (named, not imported: a dry replay runs no code)
    given = replay(a, mode="dry", store=store, entrypoint="no_such_module_anywhere:agent")
    assert given.readiness is not None
    assert not [m for m in given.readiness["modes"]["mock"]["missing"] if "entrypoint" in m], given.readiness

    diff = diff_runs(store.load_run(a), store.load_run(b))
    assert diff.sections["output"].changed is True
    assert diff.sections["tools"].changed is False
    assert diff.sections["cost"].details["input_tokens"] == {"a": 28, "b": 28, "delta": 0, "changed": False}
    same = diff_runs(store.load_run(a), store.load_run(a))
    assert not [name for name, section in same.sections.items() if section.changed]
    genai = diff_runs(store.load_run(_trace_ids(traces["genai"])[0]), store.load_run(a))
    assert genai.sections["tools"].changed is False  # same tool, same arguments and result across dialects


# -------------------------------------- deterministic replay of an OpenInference run by otel-replay code


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


@orp.model("openai.chat.completions")
def chat(**request: Any) -> Any:
    """Never runs in these tests: a replay answers it from the OpenInference recording."""
    raise AssertionError("the model was called for real")


@orp.tool("lookup_order")
def lookup_order(order_id: str) -> dict[str, str]:
    """Never runs in these tests either."""
    raise AssertionError("the tool was called for real")


PROMPT = {"system": SYSTEM}


@orp.agent("support")
def support(question: str) -> str:
    """The agent the OpenInference run recorded, written with otel-replay's decorators."""
    messages = [{"role": "system", "content": PROMPT["system"]}, {"role": "user", "content": question}]
    first = chat(model="gpt-4o-mini", messages=messages, temperature=0.2, tools=TOOLS)
    call = first["choices"][0]["message"]["tool_calls"][0]
    result = lookup_order(**json.loads(call["function"]["arguments"]))
    messages = [
        *messages,
        _drop_none(first["choices"][0]["message"]),
        {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)},
    ]
    second = chat(model="gpt-4o-mini", messages=messages, temperature=0.2, tools=TOOLS)
    return second["choices"][0]["message"]["content"]


def test_deterministic_replay_of_openinference_run(store: Store, traces: dict[str, list[SpanRecord]]) -> None:
    tid, _ = _trace_ids(traces["openinference"])
    result = replay(tid, mode="deterministic", store=store, entrypoint=f"{__name__}:support")
    assert result.divergences == () and result.outcome == "matched"
    PROMPT["system"] = "You are a terse support agent."
    try:
        changed = replay(tid, mode="deterministic", store=store, entrypoint=f"{__name__}:support")
    finally:
        PROMPT["system"] = SYSTEM
    assert changed.outcome == "diverged"
    assert changed.first_divergence is not None
    assert (changed.first_divergence.kind, changed.first_divergence.step_index) == ("request", 0)


# --------------------------------------------------------------------------- hand-written span sets

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _span(
    span_id: str,
    parent: str,
    name: str,
    attrs: dict[str, str],
    *,
    start: int,
    duration: int = 1000,
    status: str = "Ok",
    events: tuple[EventRecord, ...] = (),
) -> SpanRecord:
    return SpanRecord(
        timestamp_ns=1_700_000_000_000_000_000 + start,
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=parent,
        trace_state="",
        span_name=name,
        span_kind="Internal",
        service_name="svc",
        resource_attributes={"service.name": "svc"},
        scope_name="x",
        scope_version="",
        span_attributes=attrs,
        duration_ns=duration,
        status_code=status,
        status_message="",
        events=events,
    )


def _traceloop_trace() -> list[SpanRecord]:
    root = _span(
        "a" * 16,
        "",
        "support.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "support",
            "traceloop.workflow.name": "support",
            "traceloop.entity.input": '{"args":["refund 2077"],"kwargs":{"urgent":true}}',
            "traceloop.entity.output": '"Refund issued."',
        },
        start=0,
        duration=10_000,
    )
    chat_span = _span(
        "b" * 16,
        "a" * 16,
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.request.temperature": "0",
            "gen_ai.request.max_tokens": "64",
            "traceloop.workflow.name": "support",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Be brief.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "refund 2077",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_1",
            "gen_ai.completion.0.tool_calls.0.name": "issue_refund",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"order_id": "2077"}',
            "gen_ai.usage.prompt_tokens": "21",
            "gen_ai.usage.completion_tokens": "9",
            "llm.request.functions.0.name": "issue_refund",
            "llm.request.functions.0.parameters": '{"type":"object"}',
        },
        start=100,
    )
    tool_span = _span(
        "c" * 16,
        "a" * 16,
        "issue_refund.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "issue_refund",
            "traceloop.entity.input": '{"args":[],"kwargs":{"order_id":"2077"}}',
            "traceloop.entity.output": '{"status":"issued"}',
        },
        start=2000,
    )
    task_span = _span(
        "d" * 16,
        "a" * 16,
        "format.task",
        {
            "traceloop.span.kind": "task",
            "traceloop.entity.name": "format",
        },
        start=3000,
    )
    return [root, chat_span, tool_span, task_span]


def test_traceloop_keys() -> None:
    run = build_run(_traceloop_trace())
    assert run.dialect == "traceloop" and run.agent == "support" and run.summary.kind == "original"
    assert [(s.index, s.kind, s.name) for s in run.steps] == [(0, "model", CHAT), (1, "tool", "issue_refund")]
    model = run.steps[0].snapshots["model"]
    assert model["request"] == {
        "model": "gpt-4o",
        "temperature": 0,
        "max_tokens": 64,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "refund 2077"}],
        "tools": [{"type": "function", "function": {"name": "issue_refund", "parameters": {"type": "object"}}}],
    }
    assert model["request_hash"] == sha256_hex(canonical_json(model["request"]))
    assert run.steps[0].attributes[semconv.MODEL_REQUEST_HASH] == model["request_hash"]
    assert run.steps[0].attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == "21"
    assert model["provider"] == "openai" and model["usage"] == {"input_tokens": 21, "output_tokens": 9}
    choice = model["response"]["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {
        "name": "issue_refund",
        "arguments": '{"order_id": "2077"}',
    }
    tool = run.steps[1].snapshots["tool"]
    assert tool["arguments"] == {"order_id": "2077"} and tool["result"] == {"status": "issued"}
    assert tool["risk"] == "high"  # named like a payment: a live replay needs an approval for it
    assert run.snapshots["input"]["args"] == ["refund 2077"]
    assert run.snapshots["input"]["kwargs"] == {"urgent": True}
    assert run.snapshots["output"]["answer"] == "Refund issued."
    report = readiness(run)
    assert report["modes"]["live"]["needs_approval"] == ["issue_refund"]
    assert report["integrity"]["ok"] is True
    assert run.attributes[semconv.RUN_INPUT_TOKENS] == "21"


def test_traceloop_run_in_the_store(home: Path) -> None:
    with Store.open() as opened:
        opened.insert_spans(_traceloop_trace())
        (summary,) = opened.runs(agent="support")
        assert (summary.trace_id, summary.dialect, summary.kind, summary.step_count) == (
            TRACE,
            "traceloop",
            "original",
            None,
        )
        run = opened.load_run(TRACE)
        assert run.summary.step_count == 2 and run.to_dict()["dialect"] == "traceloop"
        assert opened.runs(agent="someone-else") == []


def test_legacy_genai_prompt_keys_and_events() -> None:
    """``gen_ai.prompt.N`` keys on one span, the v1.26 ``gen_ai.content.*`` events on another, and the
    ``gen_ai.client.inference.operation.details`` event on a third, under a GenAI ``invoke_agent`` root."""
    root = _span(
        "1" * 16,
        "",
        "invoke_agent helper",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"},
        start=0,
        duration=9000,
    )
    flat = _span(
        "2" * 16,
        "1" * 16,
        "chat m1",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "m1",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "hello",
            "gen_ai.completion.0.finish_reason": "stop",
        },
        start=10,
    )
    legacy = _span(
        "3" * 16,
        "1" * 16,
        "chat m1",
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m1"},
        start=20,
        events=(
            EventRecord(1, "gen_ai.content.prompt", {"gen_ai.prompt": '[{"role":"user","content":"hi"}]'}),
            EventRecord(
                2, "gen_ai.content.completion", {"gen_ai.completion": '[{"role":"assistant","content":"hello"}]'}
            ),
        ),
    )
    detail = _span(
        "4" * 16,
        "1" * 16,
        "chat m1",
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m1", "gen_ai.response.finish_reasons": '["stop"]'},
        start=30,
        events=(
            EventRecord(
                3,
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
                    "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"hello"}],'
                    '"finish_reason":"stop"}]',
                },
            ),
        ),
    )
    run = build_run([root, flat, legacy, detail])
    assert run.dialect == "genai" and run.agent == "helper"
    assert dialects.span_dialect(flat) == "traceloop"  # the legacy flattened keys are OpenLLMetry's
    requests = [s.snapshots["model"]["request"] for s in run.steps]
    assert requests == [{"model": "m1", "messages": [{"role": "user", "content": "hi"}]}] * 3
    hashes = {s.attributes[semconv.MODEL_REQUEST_HASH] for s in run.steps}
    assert len(hashes) == 1  # the same call reads the same whichever way its content was recorded
    answers = [s.snapshots["model"]["response"]["choices"][0]["message"]["content"] for s in run.steps]
    assert answers == ["hello"] * 3
    assert all(
        e.name not in ("gen_ai.content.prompt", "gen_ai.client.inference.operation.details")
        for s in run.steps
        for e in s.events
    )


def test_openinference_redacted_content_is_not_captured() -> None:
    root = _span(
        "5" * 16,
        "",
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.invocation_parameters": '{"model": "gpt-4o-mini"}',
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "__REDACTED__",
            "llm.token_count.prompt": "5",
            "llm.token_count.completion": "2",
        },
        start=0,
    )
    run = build_run([root])
    assert run.dialect == "openinference" and run.agent == "ChatCompletion"
    assert [(s.kind, s.name, s.span_id) for s in run.steps] == [("model", "gpt-4o-mini", "5" * 16)]  # no provider
    model = run.steps[0].snapshots["model"]
    assert model["content_captured"] is False and model["request"] == {}
    report = readiness(run)
    assert "model step 0 was recorded without its request content" in report["modes"]["deterministic"]["missing"]


def test_failed_tool_and_retries_under_genai_root() -> None:
    root = _span(
        "6" * 16,
        "",
        "invoke_agent a",
        {"gen_ai.operation.name": "invoke_agent"},
        start=0,
        status="Error",
        duration=9000,
    )
    calls = [
        _span(
            f"{i + 7:x}" * 16,
            "6" * 16,
            "execute_tool check",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "check",
                "gen_ai.tool.call.arguments": '{"sku":"A"}',
                **({"error.type": "TimeoutError"} if i == 0 else {}),
            },
            start=10 + i,
            status="Error" if i == 0 else "Ok",
        )
        for i in range(2)
    ]
    retrieval = _span(
        "9" * 16,
        "6" * 16,
        "retrieval kb",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "kb",
            "gen_ai.request.top_k": "2",
            "gen_ai.retrieval.query.text": "refunds",
            "gen_ai.retrieval.documents": '[{"id":"d1","score":0.9,"content":"30 days"}]',
        },
        start=50,
    )
    run = build_run([root, *calls, retrieval])
    assert run.status == "error" and run.agent == "a"
    assert [(s.kind, s.name, s.attempt, s.status) for s in run.steps] == [
        ("tool", "check", 1, "error"),
        ("tool", "check", 2, "ok"),
        ("retrieval", "kb", 1, "ok"),
    ]
    assert run.steps[0].snapshots["tool"]["error"] == {"type": "TimeoutError", "message": ""}
    assert run.steps[1].snapshots["tool"]["result_captured"] is False
    snap = run.steps[2].snapshots["retrieval"]
    assert snap["query"] == "refunds" and snap["top_k"] == 2
    assert snap["results"][0]["id"] == "d1" and snap["results"][0]["content_hash"] == sha256_hex("30 days")
    assert run.snapshots["output"]["error"] == {"type": "", "message": ""}


def test_traces_without_a_known_dialect_still_refuse() -> None:
    plain = _span("e" * 16, "", "GET /health", {"http.method": "GET"}, start=0)
    with pytest.raises(OtelReplayError, match="no otel-replay run root"):
        build_run([plain])
    assert dialects.span_dialect(plain) is None


def test_sdk_step_names_are_the_instrumentors() -> None:
    from otel_replay.instrumentation import anthropic as anthropic_instr
    from otel_replay.instrumentation import openai as openai_instr

    assert dialects.SDK_STEP_NAMES[("openai", "chat")] == openai_instr.CHAT_STEP
    assert dialects.SDK_STEP_NAMES[("openai", "responses")] == openai_instr.RESPONSES_STEP
    assert dialects.SDK_STEP_NAMES[("anthropic", "chat")] == anthropic_instr.MESSAGES_STEP


@orp.agent("support")
def sdk_support(question: str) -> str:
    """The OpenInference-recorded agent on the real OpenAI SDK, instrumented by otel-replay: in a replay every
    call is answered from the foreign recording (the base URL points at a closed port)."""
    import openai

    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test", max_retries=0)
    messages: list[Any] = [{"role": "system", "content": PROMPT["system"]}, {"role": "user", "content": question}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0.2, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    result = lookup_order(**json.loads(call.function.arguments))
    messages = [
        *messages,
        _drop_none(first.choices[0].message.model_dump()),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)},
    ]
    second = client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0.2, tools=TOOLS)
    return second.choices[0].message.content


def test_deterministic_replay_through_the_openai_instrumentor(
    store: Store, traces: dict[str, list[SpanRecord]]
) -> None:
    from otel_replay import instrumentation

    assert "openai" in instrumentation.instrument("openai")
    try:
        tid, _ = _trace_ids(traces["openinference"])
        result = replay(tid, mode="deterministic", store=store, entrypoint=f"{__name__}:sdk_support")
        assert result.divergences == () and result.outcome == "matched"
    finally:
        instrumentation.uninstrument("openai")
