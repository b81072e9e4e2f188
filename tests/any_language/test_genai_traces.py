"""A run recorded by another SDK's GenAI instrumentation, not by otel-replay: the support agent of
``openai_agent.mjs`` traced the OpenTelemetry way (``genai_agent.mjs``: OpenLLMetry's OpenAI instrumentation for
Node, ``@traceloop/instrumentation-openai``, which puts each chat call's content on its span as
``gen_ai.input.messages`` / ``gen_ai.output.messages``; the agent's own ``invoke_agent`` and ``execute_tool``
spans; the OpenTelemetry JS SDK exporting OTLP/HTTP JSON). The test's OTLP receiver stands in for the Collector:
it stores what it receives as the Collector's ClickHouse exporter would (the same mapping the store's ingest
uses).

From the checked-in export (``tests/fixtures/genai/``, no Node needed) and from a live run of the agent: the run
is listed by ``runs`` and shown by ``show`` as a GenAI-dialect run, and ``otel-replay serve --mode mock``
answers an agent from it, streamed or not (a call recorded whole is streamed as events built from its answer),
``matched``, with the same final output and no upstream request. The instrumentation records the whole request
(messages and tool definitions), so ``deterministic`` matches too, and a changed system prompt gets the 409 and
the prompt's diff.

``python tests/any_language/test_genai_traces.py`` writes the fixture again (with Node.js and the npm packages).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from fake_llm_servers import FakeLLMServer  # noqa: E402
from test_ts_agents import WAIT, _node  # noqa: E402
from wire_commands import start  # noqa: E402

from otel_replay.otlp_json import from_otlp_json  # noqa: E402
from otel_replay.storage.store import Store  # noqa: E402

FIXTURE = HERE.parent / "fixtures" / "genai" / "openllmetry-js-0.27.0-openai-chat.otlp.json"
ANSWER = "The weather: ticket filed for A-17"
SYSTEM = "You are a support agent."
QUESTION = "order A-17 arrived damaged"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "file_ticket",
            "description": "File a support ticket about an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "note": {"type": "string"}},
                "required": ["order_id", "note"],
            },
        },
    }
]


class Collector:
    """An OTLP/HTTP receiver on loopback (``POST /v1/traces``, JSON): the export requests' bodies, in order."""

    def __init__(self) -> None:
        bodies: list[bytes] = []

        class Receive(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                        body += self.rfile.read(size)
                        self.rfile.readline()
                    self.rfile.readline()
                else:
                    body = self.rfile.read(int(self.headers.get("content-length") or 0))
                bodies.append(body)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.bodies = bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Receive)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1/traces"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def run_traced_agent(node: str, upstream_url: str, collector: Collector, outbox: Path, **extra: str) -> str:
    """``genai_agent.mjs`` against an OpenAI-compatible server, its spans exported to ``collector``."""
    env = {
        **os.environ,
        "RW_OUTBOX": str(outbox),
        "OPENAI_API_KEY": "sk-genai-test",
        "OPENAI_BASE_URL": upstream_url,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url,
        **extra,
    }
    done = subprocess.run([node, "genai_agent.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _stored(documents: list[Any]) -> str:
    """The documents' spans stored as the Collector would; the trace id of the one run they hold."""
    records = [r for document in documents for r in from_otlp_json(document)]
    with Store.open() as store:
        store.insert_spans(records)
        (summary,) = store.runs()
    assert (summary.agent, summary.dialect, summary.kind) == ("support-desk", "genai", "original")
    return summary.trace_id


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, text=True, timeout=WAIT
    )


def _python_agent(url: str, *, stream: bool, system: str = SYSTEM) -> str:
    """The same agent on the OpenAI Python SDK: its tool loop, streamed with the SDK's stream helper or not."""
    client = OpenAI(base_url=url + "/v1", api_key="sk-genai-test", max_retries=0)
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": QUESTION}]
    while True:
        request: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS}
        if stream:
            with client.chat.completions.stream(**request) as streamed:
                message = streamed.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(**request).choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        for call in message.tool_calls:
            order = json.loads(call.function.arguments)["order_id"]  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"ticket filed for {order}"})


def _serve(trace_id: str, ready: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    return start("serve", trace_id, "--json", "--exit-after-s", str(WAIT), *args, ready=ready)


def test_a_genai_trace_from_the_js_instrumentation_is_listed_shown_and_served(home: Path, tmp_path: Path) -> None:
    trace_id = _stored([json.loads(FIXTURE.read_text())])
    listed = json.loads(_cli("runs", "--json").stdout)
    assert [(r["trace_id"], r["agent"], r["dialect"]) for r in listed] == [(trace_id, "support-desk", "genai")]
    shown = _cli("show", trace_id)
    assert shown.returncode == 0, shown.stderr
    assert "#0 model openai.chat.completions" in shown.stdout and "#1 tool file_ticket" in shown.stdout

    for stream in (False, True):
        server, url = _serve(trace_id, tmp_path / f"ready-{stream}", "--mode", "mock")
        answer = _python_agent(url, stream=stream)
        out, err = server.communicate(timeout=WAIT)
        result = json.loads(out)
        assert (answer, server.returncode, result["outcome"]) == (ANSWER, 0, "matched"), (err, result["divergences"])
        streamed_note = any("streamed to the agent as events" in n for n in result["notes"])
        assert streamed_note is stream, result["notes"]

    server, url = _serve(trace_id, tmp_path / "ready-deterministic")
    assert _python_agent(url, stream=False) == ANSWER
    out, _ = server.communicate(timeout=WAIT)
    assert (server.returncode, json.loads(out)["outcome"]) == (0, "matched")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_traced_typescript_agent_is_served_from_its_own_genai_trace(
    home: Path, tmp_path: Path, provider: str
) -> None:
    """The agent recorded by OpenLLMetry's instrumentation (OpenAI calls streamed; on Anthropic, the SDK's own
    ``anthropic.messages.create`` span inside OpenLLMetry's ``chat`` span is one step), served back to it."""
    node = _node()
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    collector = Collector()

    def agent(url: str, **extra: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "RW_OUTBOX": str(outbox),
            "OPENAI_API_KEY": "sk-genai-test",
            "ANTHROPIC_API_KEY": "sk-genai-test",
            "OPENAI_BASE_URL": url + "/v1",
            "ANTHROPIC_BASE_URL": url,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url,
            "PROVIDER": provider,
            "STREAM": "1",
            **extra,
        }
        return subprocess.run(
            [node, "genai_agent.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=WAIT
        )

    try:
        with FakeLLMServer(
            prefer_tools=("file_ticket",),
            tool_args_for={"file_ticket": {"order_id": "A-17", "note": "arrived damaged"}},
        ) as upstream:
            recorded = agent(upstream.openai_url.removesuffix("/v1"))
            requests = upstream.count
        assert (recorded.returncode, recorded.stdout.strip(), requests) == (0, ANSWER, 2), recorded.stderr
        trace_id = _stored([json.loads(body) for body in collector.bodies])
        with Store.open() as store:
            run = store.load_run(trace_id)
        step = "openai.chat.completions" if provider == "openai" else "anthropic.messages"
        assert [(s.kind, s.name) for s in run.steps] == [("model", step), ("tool", "file_ticket"), ("model", step)]

        # the upstream is stopped: served from the trace, streamed as the agent asks
        for mode in ("mock", "deterministic"):
            server, url = _serve(trace_id, tmp_path / f"ready-{mode}", "--mode", mode)
            replayed = agent(url)
            out, err = server.communicate(timeout=WAIT)
            result = json.loads(out)
            assert (replayed.stdout.strip(), server.returncode, result["outcome"]) == (ANSWER, 0, "matched"), (
                replayed.stderr,
                err,
                result["divergences"],
            )

        server, url = _serve(trace_id, tmp_path / "ready-changed")
        changed = agent(url, AGENT_SYSTEM="You are terse.")
        out, _ = server.communicate(timeout=WAIT)
    finally:
        collector.close()
    assert changed.returncode != 0 and "409" in changed.stderr, changed.stderr
    first = json.loads(out)["first_divergence"]
    assert (server.returncode, first["kind"], first["step_index"]) == (1, "request", 0), first
    assert '-      "content": "You are a support agent."' in first["diff"], first["diff"]
    assert '+      "content": "You are terse."' in first["diff"], first["diff"]
    assert (outbox / "tickets.txt").read_text().splitlines() == ["A-17: arrived damaged"] * 3


if __name__ == "__main__":  # write the fixture again
    collector = Collector()
    with FakeLLMServer(
        prefer_tools=("file_ticket",), tool_args_for={"file_ticket": {"order_id": "A-17", "note": "arrived damaged"}}
    ) as fake:
        out = Path(os.environ.get("TMPDIR", "/tmp"))
        assert run_traced_agent("node", fake.openai_url, collector, out) == ANSWER
    collector.close()
    (document,) = [json.loads(body) for body in collector.bodies]
    FIXTURE.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {FIXTURE}")
