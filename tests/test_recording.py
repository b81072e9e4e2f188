"""The recording API against the real OTel SDK: trees, snapshots, identity, errors, concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import re
import subprocess
import sys
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

import otel_replay as orp
from otel_replay import semconv
from otel_replay.exporting import setup


@pytest.fixture
def mem(home: Path) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    orp.configure(exporter=exporter, home=home)
    return exporter


def finished(mem: InMemorySpanExporter) -> list[ReadableSpan]:
    orp.flush()
    return list(mem.get_finished_spans())


def snapshots(span: ReadableSpan) -> dict[str, list[Any]]:
    """Decoded snapshot payloads of a span by kind, chunks joined."""
    chunks: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    for event in span.events:
        if event.name.startswith(semconv.SNAPSHOT_EVENT_PREFIX):
            a = event.attributes
            key = (event.name.removeprefix(semconv.SNAPSHOT_EVENT_PREFIX), a[semconv.SNAPSHOT_SEQ])
            chunks[key].append((a.get(semconv.SNAPSHOT_CHUNK_INDEX, 0), a[semconv.SNAPSHOT_PAYLOAD]))
    out: dict[str, list[Any]] = defaultdict(list)
    for (kind, _), parts in sorted(chunks.items(), key=lambda kv: kv[0][1]):
        out[kind].append(json.loads("".join(p for _, p in sorted(parts))))
    return out


def roots(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is None]


def steps_of(spans: list[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    tid = root.context.trace_id
    return sorted(
        (s for s in spans if s.context.trace_id == tid and s is not root),
        key=lambda s: s.attributes[semconv.STEP_INDEX],
    )


# ------------------------------------------------------------------------------------------- sample agent


@dataclasses.dataclass
class Ticket:
    id: int
    opened: dt.datetime


class Settings(BaseModel):
    model: str = "m-1"
    prompt_version: str = "p7"
    budget: float = 0.5


@orp.retriever
def search(query: str, top_k: int = 2, filters: dict | None = None) -> list[dict]:
    return [
        {"id": "d1", "content": "alpha", "score": 0.9, "source": "kb://a"},
        {"id": "d2", "content": "beta", "score": 0.5, "rerank_score": 0.7, "source": "kb://b"},
    ][:top_k]


@orp.model(provider="acme", model="m-1")
def llm(messages: list[dict], temperature: float = 0.0) -> dict:
    return {
        "text": messages[-1]["content"].upper(),
        "usage": {"prompt_tokens": 11, "completion_tokens": 3},
        "cost_usd": 0.001,
    }


@orp.tool(risk="read")
def read_ticket(ticket: Ticket) -> dict:
    return {"id": ticket.id, "tags": {"b", "a"}}


@orp.tool("send_email", risk="high")
def send_email(to: str, body: str) -> str:
    return "sent"


@orp.agent("helpdesk", config=Settings())
def helpdesk(question: str, *, ticket: Ticket) -> dict:
    orp.record_state({"phase": "start"}, transition="init->start")
    docs = search(question, top_k=2, filters={"lang": "en"})
    orp.record_context(system_rules="be brief", rag_context=[d["content"] for d in docs])
    answer = llm([{"role": "user", "content": question}])
    read_ticket(ticket)
    orp.record_approval("ap-1", status="approved", approver="lead", tool="send_email")
    send_email("a@example.com", answer["text"])
    orp.record_safety({"verdict": "pass"})
    return {"answer": answer["text"], "citations": [d["source"] for d in docs]}


def test_a_run_is_one_trace_with_all_eight_snapshot_kinds(mem: InMemorySpanExporter) -> None:
    result = helpdesk("where is it?", ticket=Ticket(7, dt.datetime(2026, 1, 2, 3, 4, 5)))
    assert result["answer"] == "WHERE IS IT?"
    spans = finished(mem)
    (root,) = roots(spans)
    assert root.name == "invoke_agent helpdesk"
    a = root.attributes
    assert a[semconv.RUN_KIND] == "original"
    assert a[semconv.SCHEMA_VERSION_ATTR] == semconv.SCHEMA_VERSION
    assert a[semconv.RUN_ENTRYPOINT] == f"{__name__}:helpdesk"
    assert uuid.UUID(a[semconv.RUN_ID])
    assert a[semconv.CONFIG_PROMPT_VERSION] == "p7"
    assert a[semconv.RUN_STEP_COUNT] == 4
    assert a[semconv.RUN_INPUT_TOKENS] == 11 and a[semconv.RUN_OUTPUT_TOKENS] == 3
    assert root.status.status_code is StatusCode.OK

    steps = steps_of(spans, root)
    assert [(s.attributes[semconv.STEP_KIND], s.attributes[semconv.STEP_NAME]) for s in steps] == [
        ("retrieval", "search"),
        ("model", "llm"),
        ("tool", "read_ticket"),
        ("tool", "send_email"),
    ]
    assert [s.name for s in steps] == [
        "retrieval search",
        "chat m-1",
        "execute_tool read_ticket",
        "execute_tool send_email",
    ]
    kinds = set(snapshots(root))
    for step in steps:
        kinds |= set(snapshots(step))
    assert kinds == {k.value for k in semconv.SnapshotKind}

    run_snaps = snapshots(root)
    (inp,) = run_snaps["input"]
    assert inp["entrypoint"] == f"{__name__}:helpdesk"
    assert inp["args"] == ["where is it?"]
    assert inp["kwargs"]["ticket"]["$type"] == "dataclass"
    assert inp["kwargs"]["ticket"]["fields"]["opened"] == {"$type": "datetime", "value": "2026-01-02T03:04:05"}
    (config,) = run_snaps["config"]
    assert config["prompt_version"] == "p7" and config["budget"] == 0.5
    (output,) = run_snaps["output"]
    assert output["answer"] == "WHERE IS IT?" and output["citations"] == ["kb://a", "kb://b"]
    assert output["safety"] == {"verdict": "pass"}
    assert run_snaps["state"][0]["transition"] == "init->start"


def test_step_snapshots_hold_arguments_results_and_hashes(mem: InMemorySpanExporter) -> None:
    helpdesk("q", ticket=Ticket(1, dt.datetime(2026, 1, 1)))
    spans = finished(mem)
    retrieval, model_step, read, send = steps_of(spans, roots(spans)[0])

    (r,) = snapshots(retrieval)["retrieval"]
    assert r["query"] == "q" and r["top_k"] == 2 and r["filters"] == {"lang": "en"}
    assert [d["id"] for d in r["results"]] == ["d1", "d2"]
    assert r["results"][1]["rerank_score"] == 0.7 and r["results"][0]["citation"] == "kb://a"
    assert re.fullmatch(r"hmac-sha256:[0-9a-f]{64}", r["results"][0]["content_hash"])
    assert retrieval.attributes[semconv.RETRIEVAL_RESULT_COUNT] == 2

    (m,) = snapshots(model_step)["model"]
    assert m["request"]["messages"] == [{"role": "user", "content": "q"}]
    assert m["response"]["text"] == "Q"
    assert m["usage"] == {"input_tokens": 11, "output_tokens": 3, "cost_usd": 0.001}
    assert model_step.attributes[semconv.MODEL_REQUEST_HASH] == m["request_hash"]
    assert model_step.attributes[semconv.GEN_AI_PROVIDER_NAME] == "acme"
    assert model_step.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 11

    (t,) = snapshots(read)["tool"]
    assert t["result"] == {"id": 1, "tags": {"$type": "set", "items": ["a", "b"]}}
    assert read.attributes[semconv.TOOL_ARGS_HASH] == t["args_hash"]
    assert read.attributes[semconv.TOOL_RESULT_HASH] == t["result_hash"]
    assert read.attributes[semconv.TOOL_RISK] == "read"

    (s,) = snapshots(send)["tool"]
    assert (s["approval_id"], s["approval_status"]) == ("ap-1", "approved")
    assert send.attributes[semconv.APPROVAL_STATUS] == "approved"
    assert send.attributes[semconv.TOOL_RISK] == "high"


def test_equal_arguments_hash_equal_across_runs(mem: InMemorySpanExporter) -> None:
    for _ in range(2):
        helpdesk("same", ticket=Ticket(3, dt.datetime(2026, 5, 5)))
    spans = finished(mem)
    hashes = [steps_of(spans, r)[2].attributes[semconv.TOOL_ARGS_HASH] for r in roots(spans)]
    assert len(hashes) == 2 and hashes[0] == hashes[1]


def test_a_failing_run_is_recorded_as_error_and_the_exception_propagates_unchanged(mem: InMemorySpanExporter) -> None:
    boom = RuntimeError("database exploded")

    @orp.tool
    def fragile() -> None:
        raise boom

    @orp.agent
    def failing() -> None:
        fragile()

    with pytest.raises(RuntimeError) as caught:
        failing()
    assert caught.value is boom
    spans = finished(mem)
    (root,) = roots(spans)
    assert root.status.status_code is StatusCode.ERROR
    exc_events = [e for e in root.events if e.name == "exception"]
    assert exc_events[0].attributes["exception.type"] == "RuntimeError"
    assert "database exploded" in exc_events[0].attributes["exception.message"]
    (output,) = snapshots(root)["output"]
    assert output["error"]["type"] == "RuntimeError"
    (step,) = steps_of(spans, root)
    assert step.status.status_code is StatusCode.ERROR


def test_retries_count_attempts(mem: InMemorySpanExporter) -> None:
    calls = {"n": 0}

    @orp.tool
    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise TimeoutError("slow")
        return "ok"

    @orp.agent
    def retrying() -> str:
        for _ in range(3):
            try:
                return flaky()
            except TimeoutError:
                continue
        return "gave up"

    retrying()
    retrying()  # a fresh run starts counting again: flaky succeeds at once
    spans = finished(mem)
    first, second = sorted(roots(spans), key=lambda s: s.start_time)
    assert [s.attributes[semconv.STEP_ATTEMPT] for s in steps_of(spans, first)] == [1, 2, 3]
    assert [s.attributes[semconv.STEP_ATTEMPT] for s in steps_of(spans, second)] == [1]


def test_nested_agents_are_agent_steps_of_one_run(mem: InMemorySpanExporter) -> None:
    @orp.agent("inner")
    def inner(x: int) -> int:
        return read_ticket(Ticket(x, dt.datetime(2026, 1, 1)))["id"]

    @orp.agent("outer")
    def outer() -> int:
        return inner(1) + inner(2)

    assert outer() == 3
    spans = finished(mem)
    (root,) = roots(spans)
    steps = steps_of(spans, root)
    assert [(s.attributes[semconv.STEP_KIND], s.attributes[semconv.STEP_INDEX]) for s in steps] == [
        ("agent", 0),
        ("tool", 1),
        ("agent", 2),
        ("tool", 3),
    ]
    assert steps[1].parent.span_id == steps[0].context.span_id
    assert steps[3].parent.span_id == steps[2].context.span_id
    assert steps[0].name == "invoke_agent inner"


def test_concurrent_asyncio_tasks_build_separate_trees(mem: InMemorySpanExporter) -> None:
    @orp.tool
    async def fetch(i: int) -> int:
        await asyncio.sleep(0.001 * (i % 3))
        return i

    @orp.agent("async-agent")
    async def worker(i: int) -> int:
        total = 0
        for j in range(3):
            total += await fetch(i * 10 + j)
            await asyncio.sleep(0)
        return total

    async def main() -> list[int]:
        return await asyncio.gather(*(worker(i) for i in range(12)))

    assert asyncio.run(main()) == [30 * i + 3 for i in range(12)]
    spans = finished(mem)
    rs = roots(spans)
    assert len(rs) == 12
    for root in rs:
        (inp,) = snapshots(root)["input"]
        i = inp["args"][0]
        steps = steps_of(spans, root)
        assert [s.attributes[semconv.STEP_INDEX] for s in steps] == [0, 1, 2]
        assert [snapshots(s)["tool"][0]["arguments"]["i"] for s in steps] == [i * 10, i * 10 + 1, i * 10 + 2]
        assert all(s.parent.span_id == root.context.span_id for s in steps)


def test_threads_build_separate_trees(mem: InMemorySpanExporter) -> None:
    @orp.agent("threaded")
    def work(i: int) -> int:
        for j in range(4):
            read_ticket(Ticket(i * 100 + j, dt.datetime(2026, 1, 1)))
        return i

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = finished(mem)
    rs = roots(spans)
    assert len(rs) == 8
    for root in rs:
        i = snapshots(root)["input"][0]["args"][0]
        ids = [snapshots(s)["tool"][0]["result"]["id"] for s in steps_of(spans, root)]
        assert ids == [i * 100 + j for j in range(4)]


def test_identity_lands_on_the_run(mem: InMemorySpanExporter) -> None:
    @orp.agent
    def hello() -> str:
        return "hi"

    with orp.identity(tenant="t1", role="admin"), orp.identity(session="s-9"):
        hello()
    hello()
    spans = finished(mem)
    first, second = sorted(roots(spans), key=lambda s: s.start_time)
    assert first.attributes[semconv.TENANT_ID] == "t1"
    assert first.attributes[semconv.SESSION_ID] == "s-9"
    assert first.attributes[semconv.GEN_AI_CONVERSATION_ID] == "s-9"
    inp = snapshots(first)["input"][0]
    assert (inp["tenant"], inp["role"], inp["session"]) == ("t1", "admin", "s-9")
    assert semconv.TENANT_ID not in second.attributes


def test_attached_files_are_in_the_input_snapshot(mem: InMemorySpanExporter, tmp_path: Path) -> None:
    small = tmp_path / "note.txt"
    small.write_text("hello file")

    @orp.agent
    def with_files() -> None:
        orp.attach_file(small)
        orp.attach_file(b"\x00\x01binary", name="blob.bin", store_binary=True)
        orp.attach_file(b"x" * 200_000, name="big.txt")
        orp.attach_file(b"\x00\x02kept out", name="other.bin")

    with_files()
    (root,) = roots(finished(mem))
    files = snapshots(root)["input"][0]["files"]
    assert [f["name"] for f in files] == ["note.txt", "blob.bin", "big.txt", "other.bin"]
    assert files[0]["content_text"] == "hello file" and files[0]["media_type"] == "text/plain"
    assert files[1]["content_base64"] == "AAFiaW5hcnk="
    assert files[2]["size"] == 200_000 and files[2]["content_text"] is None
    assert re.fullmatch(r"hmac-sha256:[0-9a-f]{64}", files[2]["sha256"])
    assert files[3]["size"] == 10 and files[3]["content_base64"] is None and files[3]["content_text"] is None


class Weird:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def test_values_json_cannot_hold_are_tagged_and_never_break_the_run(mem: InMemorySpanExporter) -> None:
    cyclic: dict[str, Any] = {"name": "loop"}
    cyclic["self"] = cyclic

    @orp.tool
    def odd(a: Any, b: Any, c: Any, d: Any, e: Any) -> Any:
        return {"ok": True}

    @orp.agent
    def strange() -> str:
        odd(b"\xff\x00", frozenset({3, 1}), Weird(), cyclic, float("nan"))
        return "survived"

    assert strange() == "survived"
    spans = finished(mem)
    (step,) = steps_of(spans, roots(spans)[0])
    args = snapshots(step)["tool"][0]["arguments"]
    assert args["a"] == {"$type": "bytes", "base64": "/wA="}
    assert args["b"] == {"$type": "frozenset", "items": [1, 3]}
    assert args["c"]["$type"] == "object" and "unrepresentable" in args["c"]["repr"]
    assert args["d"]["self"] == {"$type": "cycle", "class": "dict"}
    assert args["e"] == {"$type": "float", "value": "NaN"}


def test_recording_failures_never_reach_the_agent(mem: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = setup.runtime()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("redactor broke")

    monkeypatch.setattr(rt.redactor, "redact", broken)

    @orp.agent
    def resilient(x: int) -> int:
        orp.record_state({"x": x})
        return read_ticket(Ticket(x, dt.datetime(2026, 1, 1)))["id"]

    assert resilient(5) == 5


def test_large_payloads_are_chunked_and_oversized_ones_truncated(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_REPLAY_SNAPSHOT_CHUNK_CHARS", "1000")
    monkeypatch.setenv("OTEL_REPLAY_SNAPSHOT_MAX_BYTES", "20000")
    mem = InMemorySpanExporter()
    orp.configure(exporter=mem, home=home / "other")

    @orp.tool
    def echo(text: str) -> int:
        return len(text)

    @orp.agent
    def big() -> None:
        echo("é" * 4000)
        echo("z" * 50_000)

    big()
    spans = finished(mem)
    chunked, truncated = steps_of(spans, roots(spans)[0])
    events = [e for e in chunked.events if e.name == "otel_replay.snapshot.tool"]
    assert len(events) > 1
    assert [e.attributes[semconv.SNAPSHOT_CHUNK_INDEX] for e in events] == list(range(len(events)))
    assert {e.attributes[semconv.SNAPSHOT_CHUNK_COUNT] for e in events} == {len(events)}
    assert snapshots(chunked)["tool"][0]["arguments"]["text"] == "é" * 4000
    (marker_event,) = [e for e in truncated.events if e.name == "otel_replay.snapshot.tool"]
    assert marker_event.attributes[semconv.SNAPSHOT_TRUNCATED] is True
    marker = snapshots(truncated)["tool"][0]
    assert marker["$truncated"] is True and marker["original_size"] > 50_000


def test_bad_decorator_arguments_fail_at_definition() -> None:
    with pytest.raises(ValueError) as refused:
        orp.tool("x", risk="dangerous")
    assert str(refused.value) == "risk must be one of 'read', 'write', 'high', got 'dangerous'"
    with pytest.raises(ValueError, match="risk must be one of 'read', 'write', 'high', got None"):
        orp.tool("x", risk=None)


def test_configure_attaches_to_an_application_provider(tmp_path: Path) -> None:
    script = f"""
import otel_replay as orp
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
app_exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(app_exporter))
trace.set_tracer_provider(provider)
mine = InMemorySpanExporter()
assert orp.configure(exporter=mine, home={str(tmp_path)!r}) is provider
assert orp.configure() is provider
@orp.agent
def hello():
    return 1
hello()
orp.flush()
assert [s.name for s in app_exporter.get_finished_spans()] == ["invoke_agent hello"]
assert [s.name for s in mine.get_finished_spans()] == ["invoke_agent hello"]
print("attached")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "attached" in out.stdout
