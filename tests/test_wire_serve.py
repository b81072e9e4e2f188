"""``otel-replay serve TRACE_ID``: a run recorded through ``otel-replay proxy`` replayed to the same client code,
with the upstream stopped, as a user runs them (both commands processes of their own).

The agent here is a tool loop on the official ``openai`` client (chat completions, streamed, one tool whose
result it sends back) and one on the ``anthropic`` client. Served the recording: the same final answer, no
request to the upstream, ``matched`` (exit 0) and a stored, audited replay run whose ``diff`` with the original
is empty. With a changed system prompt a deterministic replay answers the changed request with HTTP 409 and the
divergence (step, kind, unified diff), answers no later call, and exits 1; ``diff`` shows the prompt change.
"""

from __future__ import annotations

import json
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
from wire_commands import start as _start
from wire_commands import start_proxy

from otel_replay.storage.store import Store

WAIT = 60
KEY = "sk-serve-test-" + "q" * 32
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def agent(base_url: str, system: str = "You are a weather bot.") -> str:
    """The agent: ask, run the tool the model asks for, send its result back, stream the final answer."""
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, default_headers={"x-otel-replay-run": "wx"})
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "weather in Oslo?"},
    ]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    message = first.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "rain, 12 C"})
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


@pytest.fixture
def recorded(home: Path, tmp_path: Path) -> Iterator[tuple[str, str, FakeLLMServer]]:
    """The agent run through the proxy against the fake upstream: (trace id, its answer, the upstream)."""
    with FakeLLMServer() as upstream:
        proxy, url = start_proxy(upstream, tmp_path / "proxy-ready")
        answer = agent(url + "/v1")
        proxy.send_signal(signal.SIGTERM)
        _, err = proxy.communicate(timeout=WAIT)
        assert proxy.returncode == 0, err
        with Store.open() as store:
            (run,) = store.runs(kind="original")
        yield run.trace_id, answer, upstream


def _serve(trace_id: str, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    return _start("serve", trace_id, "--json", *extra, ready=tmp_path / f"serve-ready-{time.monotonic_ns()}")


def test_a_served_recording_gives_the_agent_the_same_run(recorded: Any, tmp_path: Path) -> None:
    trace_id, answer, upstream = recorded
    with Store.open() as store:
        original = store.load_run(trace_id)
    assert [(s.kind, s.name) for s in original.steps] == [
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("model", "openai.chat.completions"),
    ]
    requests = upstream.count
    server, url = _serve(trace_id, tmp_path)
    assert agent(url + "/v1") == answer
    out, err = server.communicate(timeout=WAIT)
    assert server.returncode == 0, err
    result = json.loads(out)
    assert (result["outcome"], result["mode"], result["original_trace_id"]) == ("matched", "deterministic", trace_id)
    assert upstream.count == requests  # nothing reached the upstream
    diff = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "diff", trace_id, result["replay_trace_id"], "--json"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    sections = json.loads(diff.stdout)["diff"]
    assert not sections["tools"]["changed"] and not sections["requests"]["changed"], sections["requests"]
    audit = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "audit", "--json"], capture_output=True, text=True, timeout=WAIT
    )
    rows = [row for row in json.loads(audit.stdout) if row["replay_trace_id"] == result["replay_trace_id"]]
    assert [(r["mode"], r["outcome"], r["original_trace_id"]) for r in rows] == [("deterministic", "matched", trace_id)]


def test_a_changed_prompt_gets_a_409_with_the_divergence_and_the_replay_diverges(recorded: Any, tmp_path: Path) -> None:
    trace_id, _, _ = recorded
    server, url = _serve(trace_id, tmp_path)
    with pytest.raises(openai.APIStatusError) as raised:
        agent(url + "/v1", system="You are a terse weather bot.")
    assert raised.value.status_code == 409
    divergence = raised.value.body["divergence"] if isinstance(raised.value.body, dict) else None
    assert divergence is not None and (divergence["step"], divergence["kind"]) == (0, "request"), raised.value.body
    assert "+" in divergence["diff"] and "terse" in divergence["diff"]
    out, err = server.communicate(timeout=WAIT)
    assert server.returncode == 1, err
    result = json.loads(out)
    assert result["outcome"] == "diverged" and result["first_divergence"]["kind"] == "request"
    diff = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "diff", trace_id, result["replay_trace_id"], "--json"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    requests = json.loads(diff.stdout)["diff"]["requests"]  # otel-replay diff shows the prompt change
    (changed,) = requests["details"]["changed"]
    assert changed["a_index"] == 0 and '-      "content": "You are a weather bot."' in changed["diff"], changed


def test_mock_answers_in_order_whatever_was_asked(recorded: Any, tmp_path: Path) -> None:
    trace_id, answer, _ = recorded
    server, url = _serve(trace_id, tmp_path, "--mode", "mock")
    assert agent(url + "/v1", system="You are a terse weather bot.") == answer
    out, _ = server.communicate(timeout=WAIT)
    result = json.loads(out)
    assert server.returncode == 1 and result["outcome"] == "diverged"  # answered, and the change is reported
    assert result["first_divergence"]["kind"] == "request"


def test_serve_refuses_a_trace_it_does_not_have(home: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "serve", "0" * 32], capture_output=True, text=True, timeout=WAIT
    )
    assert out.returncode == 2 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr
    _ = anthropic  # the Anthropic client is exercised by test_wire_proxy.py


def test_then_live_forwards_exactly_the_calls_after_the_divergence(recorded: Any, tmp_path: Path) -> None:
    """``--then-live``: the call that diverged and every later one go to the upstream (a partial replay); the
    calls before it were answered from the recording. The replay ends on SIGTERM."""
    trace_id, _, _ = recorded
    with FakeLLMServer() as live:
        server, url = _serve(
            trace_id,
            tmp_path,
            "--then-live",
            "--openai-upstream",
            live.openai_url,
            "--reason",
            "try the terse prompt for real",
        )
        answer = agent(url + "/v1", system="You are a terse weather bot.")
        assert answer.startswith("The weather: ")  # the live upstream's answer, after its own tool call
        assert [path for path, _ in live.requests] == ["/v1/chat/completions"] * 2  # both calls went live
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=WAIT)
    result = json.loads(out)
    assert server.returncode == 1 and result["outcome"] == "diverged", err
    assert result["first_divergence"]["step_index"] == 0
    assert any("--then-live: 2 calls" in note for note in result["notes"]), result["notes"]


def test_then_live_needs_an_upstream_and_a_reason(recorded: Any) -> None:
    trace_id, _, _ = recorded
    for extra, needle in (([], "--openai-upstream"), (["--openai-upstream", "http://127.0.0.1:9/v1"], "--reason")):
        out = subprocess.run(
            [sys.executable, "-m", "otel_replay.cli", "serve", trace_id, "--then-live", *extra],
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_call_recorded_whole_is_streamed_to_a_client_that_streams(home: Path, tmp_path: Path) -> None:
    """Chat completions, Responses and Messages calls recorded without streaming, then made streamed through
    each SDK's own stream helper against ``serve --mode mock``: the SDK assembles from the events the server
    builds the same answer the recorded call returned (text, tool calls, ids, finish reason, usage); the
    report says so, and counts the added ``stream`` as the request's one difference."""
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    calls = {
        "chat": lambda o, a, **s: o.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "weather in Oslo?"}], tools=TOOLS, **s
        ),
        "responses": lambda o, a, **s: o.responses.create(model="gpt-4o-mini", input="hello there", **s),
        "responses-tool": lambda o, a, **s: o.responses.create(
            model="gpt-4o-mini", input="weather in Oslo?", tools=[tool], **s
        ),
        "messages": lambda o, a, **s: a.messages.create(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "hi"}], **s
        ),
    }
    streamed = {
        "chat": lambda o, a: o.chat.completions.stream(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "weather in Oslo?"}], tools=TOOLS
        ),
        "responses": lambda o, a: o.responses.stream(model="gpt-4o-mini", input="hello there"),
        "responses-tool": lambda o, a: o.responses.stream(model="gpt-4o-mini", input="weather in Oslo?", tools=[tool]),
        "messages": lambda o, a: a.messages.stream(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        ),
    }

    def clients(url: str) -> tuple[openai.OpenAI, anthropic.Anthropic]:
        return (
            openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0),
            anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0),
        )

    whole: dict[str, Any] = {}
    with FakeLLMServer() as upstream:
        proxy, url = start_proxy(upstream, tmp_path / "proxy-ready")
        for name, call in calls.items():
            whole[name] = call(*clients(url)).model_dump()
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(timeout=WAIT) == 0
    with Store.open() as store:
        runs = sorted(store.runs(kind="original"), key=lambda r: r.started_at)
    assert len(runs) == len(calls)

    def essence(name: str, answer: dict[str, Any]) -> Any:
        if name == "chat":
            message = answer["choices"][0]["message"]
            calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
            return (answer["id"], message["content"], calls, answer["choices"][0]["finish_reason"])
        if name.startswith("responses"):
            keep = ("type", "id", "call_id", "name", "arguments", "role")
            items = [
                ({k: i.get(k) for k in keep}, [c.get("text") for c in i.get("content") or ()]) for i in answer["output"]
            ]
            return (answer["id"], items, answer["usage"])
        return (answer["id"], answer["content"], answer["stop_reason"], answer["usage"]["output_tokens"])

    for (name, make), run in zip(streamed.items(), runs, strict=True):
        server, url = _serve(run.trace_id, tmp_path, "--mode", "mock")
        with make(*clients(url)) as stream:
            if name == "chat":
                final = stream.get_final_completion()
            elif name.startswith("responses"):
                final = stream.get_final_response()
            else:
                final = stream.get_final_message()
        out, err = server.communicate(timeout=WAIT)
        assert essence(name, final.model_dump()) == essence(name, whole[name]), name
        result = json.loads(out)
        assert any("streamed to the agent as events" in n for n in result["notes"]), result["notes"]
        # a recording of otel-replay's own keeps the request whole: asking for a stream is a change it reports
        (divergence,) = result["divergences"]
        assert (server.returncode, divergence["kind"]) == (1, "request"), err
        assert '+  "stream": true' in divergence["diff"], divergence["diff"]
