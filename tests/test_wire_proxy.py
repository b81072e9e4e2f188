"""``otel-replay proxy``: the recording proxy, run as a user runs it (the console command, a process of its own)
between the official ``openai`` and ``anthropic`` Python clients and the fake OpenAI + Anthropic server.

Each exchange reaches the upstream unchanged (the client gets what the upstream sent, a stream event by event)
and is recorded as a model step of the run its headers name: one run per ``traceparent`` trace (in that
trace), per ``x-otel-replay-run`` name, or per request. Tool calls whose results the next request sends back
are observed tool steps. The API key in ``Authorization`` is passed through and never recorded; a secret in a
message is redacted. Bad requests get one JSON error and one stderr line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fake_llm_servers import FakeLLMServer

from otel_replay import semconv
from otel_replay.storage.store import Store

API_KEY = "sk-proxy-test-" + "k" * 40
"""The client's key: forwarded to the upstream, never recorded."""
SECRET = "ghp_" + "S3cr3tT0k3nV4lu3" * 2 + "abcd"
"""A GitHub token a user pastes into a message: redacted in the recording."""
WAIT = 60


class Proxy:
    """A running ``otel-replay proxy`` process and its base URL."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process, self.url = process, url

    def stop(self) -> str:
        """SIGTERM (runs closed, spans flushed); its stderr."""
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=WAIT)
        assert self.process.returncode == 0, err
        assert "Traceback" not in err, err
        return err


@pytest.fixture
def upstream() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def start(home: Path, tmp_path: Path, upstream: FakeLLMServer) -> Iterator[Any]:
    started: list[Proxy] = []

    def start(*extra: str, openai_url: str | None = None) -> Proxy:
        ready = tmp_path / f"ready-{len(started)}"
        command = [sys.executable, "-m", "otel_replay.cli", "proxy", "--port", "0", "--ready-file", str(ready)]
        command += ["--openai-upstream", openai_url or upstream.openai_url]
        command += ["--anthropic-upstream", upstream.anthropic_url, *extra]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + WAIT
        while not ready.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the proxy did not get ready"
            time.sleep(0.02)
        proxy = Proxy(process, ready.read_text().strip())
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        if proxy.process.poll() is None:
            proxy.process.kill()
            proxy.process.communicate()


def _client(proxy: Proxy, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=API_KEY, max_retries=0, default_headers=headers)


def _runs() -> list[Any]:
    with Store.open() as store:
        return [store.load_run(r.trace_id) for r in store.runs(kind="original")]


def _stored_text() -> str:
    """Every stored span of every run, as text (what an attacker reading the store sees)."""
    return "\n".join(repr(span) for run in _runs() for span in run.spans)


def test_each_request_is_forwarded_unchanged_and_recorded_as_a_model_step(start: Any, upstream: FakeLLMServer) -> None:
    proxy = start()
    client = _client(proxy)
    direct = openai.OpenAI(base_url=upstream.openai_url, api_key=API_KEY, max_retries=0)
    ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"my token is {SECRET}, hi"}]}
    answer = client.chat.completions.create(**ask)
    assert answer.choices[0].message.content == direct.chat.completions.create(**ask).choices[0].message.content
    streamed = "".join(
        c.choices[0].delta.content or "" for c in client.chat.completions.create(**ask, stream=True) if c.choices
    )
    assert streamed == answer.choices[0].message.content
    reply = anthropic.Anthropic(base_url=proxy.url, api_key=API_KEY, max_retries=0).messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.content[0].text
    responses = client.responses.create(model="gpt-4o-mini", input="hello")
    assert responses.output_text
    (_path, body), *_ = [r for r in upstream.requests if r[0].endswith("/chat/completions")]
    assert body == ask  # forwarded unchanged
    proxy.stop()
    runs = _runs()
    assert len(runs) == 4  # no header: every request a run of its own
    steps = sorted((s.kind, s.name) for run in runs for s in run.steps)
    assert steps == [
        ("model", "anthropic.messages"),
        ("model", "openai.chat.completions"),
        ("model", "openai.chat.completions"),
        ("model", "openai.responses"),
    ]
    for run in runs:
        assert run.attributes[semconv.RUN_BOUNDARY] == "wire"
        (step,) = run.steps
        assert step.attributes[semconv.STEP_INSTRUMENTATION] == "wire"
        assert step.snapshots["model"]["response"] is not None
    stream = next(s for r in runs for s in r.steps if (s.snapshots["model"]["request"] or {}).get("stream"))
    recorded = stream.snapshots["model"]["response"]
    assert recorded["otel_replay.stream"] == 1 and recorded["complete"] and recorded["done"]
    content = recorded["response"]["choices"][0]["message"]["content"]  # the upstream echoed the token: redacted
    assert content == streamed.replace(SECRET, content[len("echo: my token is ") :].split(",")[0])
    assert content.startswith("echo: my token is [REDACTED:github_token:")
    stored = _stored_text()
    assert API_KEY not in stored and "k" * 40 not in stored  # the Authorization header is never recorded
    assert SECRET not in stored  # a secret in a message is redacted


def test_runs_group_by_trace_by_name_or_per_request(start: Any) -> None:
    proxy = start("--run-idle-s", "600")
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traced = _client(proxy, traceparent=f"00-{trace_id}-00f067aa0ba902b7-01")
    for _ in range(2):
        traced.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    first, second = (
        _client(proxy, **{"x-otel-replay-run": "checkout"}),
        _client(proxy, **{"x-otel-replay-run": "refund"}),
    )
    first.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
    first.chat.completions.create(model="m", messages=[{"role": "user", "content": "c"}])
    second.chat.completions.create(model="m", messages=[{"role": "user", "content": "d"}])  # closes "checkout"
    proxy.stop()
    runs = {(r.agent, len(r.steps)): r for r in _runs()}
    assert set(runs) == {("proxy", 2), ("checkout", 2), ("refund", 1)}
    assert runs["proxy", 2].trace_id == trace_id  # the agent's own trace
    root = next(s for s in runs["proxy", 2].spans if semconv.RUN_ID in s.span_attributes)
    assert root.parent_span_id == ""  # a run root, as every run's: linked to the request's span
    assert [(link.trace_id, link.span_id) for link in root.links] == [(trace_id, "00f067aa0ba902b7")]


def test_tool_results_sent_back_are_observed_tool_steps(start: Any, upstream: FakeLLMServer) -> None:
    proxy = start("--run-idle-s", "600")
    client = _client(proxy, **{"x-otel-replay-run": "weather"})
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "weather in Oslo?"}]
    asked = client.chat.completions.create(model="m", messages=messages, tools=tools)
    (call,) = asked.choices[0].message.tool_calls or []
    messages += [asked.choices[0].message.model_dump(exclude_none=True)]
    messages += [{"role": "tool", "tool_call_id": call.id, "content": "rain, 12 C"}]
    final = client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert "rain, 12 C" in (final.choices[0].message.content or "")
    proxy.stop()
    (run,) = _runs()
    assert [(s.kind, s.name) for s in run.steps] == [
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("model", "openai.chat.completions"),
    ]
    tool = run.steps[1]
    assert tool.attributes[semconv.TOOL_OBSERVED] == "true"
    assert tool.snapshots["tool"]["arguments"] == json.loads(call.function.arguments)
    assert tool.snapshots["tool"]["result"] == "rain, 12 C"


def test_bad_requests_get_one_json_error_and_the_proxy_goes_on(start: Any, tmp_path: Path) -> None:
    import http.client
    from urllib.parse import urlsplit

    proxy = start()
    where = urlsplit(proxy.url)
    cases = [
        ("GET", "/v1/chat/completions", b"", 405),
        ("POST", "/v1/embeddings", b"{}", 404),
        ("POST", "/v1/chat/completions", b"{not json", 400),
        ("POST", "/v1/messages", b"[1, 2]", 400),
    ]
    for method, path, body, status in cases:
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=WAIT)
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = json.loads(response.read())
        assert response.status == status and payload["error"]["type"] == "otel_replay_error", (path, payload)
        connection.close()
    answer = _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "ok?"}])
    assert answer.choices[0].message.content
    err = proxy.stop()
    assert err.count("otel-replay proxy: ") >= len(cases)


def test_an_unreachable_upstream_is_a_502_and_a_failed_step(start: Any) -> None:
    proxy = start(openai_url="http://127.0.0.1:9/v1")
    with pytest.raises(openai.APIStatusError) as raised:
        _client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert raised.value.status_code == 502
    proxy.stop()
    (run,) = _runs()
    assert [s.status for s in run.steps] == ["error"]


def test_the_proxy_refuses_without_an_upstream_and_binds_loopback_by_default(home: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "proxy"], capture_output=True, text=True, timeout=WAIT
    )
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "proxy", "--openai-upstream", "ftp://x"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert bad.returncode == 2 and "--openai-upstream" in bad.stderr
    assert os.environ.get("OTEL_REPLAY_HOME")
