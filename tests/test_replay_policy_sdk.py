"""Policy replays of an OpenAI-SDK tool loop (and Responses / Anthropic calls) against the project's fake model
server: whatif mode (models called for real, tools from the recording), model overrides applied to what the
SDK sends, a changed system prompt in a deterministic replay, the side-effect guard in whatif, and
``otel-replay replay --mode whatif``. The fake server's request log proves which requests were really sent.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fake_llm_servers import FakeLLMServer

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.anthropic import AnthropicInstrumentor
from otel_replay.instrumentation.openai import OpenAIInstrumentor
from otel_replay.replay.matching.policy import ReplayPolicy
from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent
BASE_URL = ""
"""The fake server's URL (the agents read it at call time; a replay runs this module's agents again); a
subprocess reads it from ``POLICY_FAKE_URL``."""
PROBE = False
"""Set by a test before a replay: the agent also opens a connection of its own (not a model call)."""
MODEL = "gpt-4o-mini"
SYSTEM = "You are a weather assistant. Use the tools."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
RAN: list[str] = []
"""Every real execution of the tool."""


@orp.tool("get_weather", risk="read")
def get_weather(city: str) -> dict[str, Any]:
    """The tool the model asks for."""
    RAN.append(city)
    return {"city": city, "forecast": "sunny", "celsius": 21}


@orp.agent("policy-weather-agent")
def weather_agent(question: str) -> str:
    """One tool round trip through Chat Completions; a model that asks for no tool is answered directly."""
    if PROBE:
        try:
            socket.create_connection(("127.0.0.1", int(BASE_URL.rsplit(":", 1)[1].split("/")[0])), timeout=5).close()
        except OSError:
            pass
    url = BASE_URL or os.environ["POLICY_FAKE_URL"]  # never a default (real) endpoint
    client = openai.OpenAI(base_url=url, api_key="sk-test-not-a-key", max_retries=0)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    calls = first.choices[0].message.tool_calls or []
    if not calls:
        return first.choices[0].message.content or ""
    call = calls[0]
    result = get_weather(**json.loads(call.function.arguments))
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    final = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    return final.choices[0].message.content or ""


@orp.agent("policy-multi-sdk-agent")
def multi_sdk_agent(question: str) -> dict[str, str]:
    """One Responses call and one Anthropic Messages call, each with its own system prompt."""
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test-not-a-key", max_retries=0)
    response = client.responses.create(model=MODEL, instructions=SYSTEM, input=question)
    claude = anthropic.Anthropic(base_url=BASE_URL.removesuffix("/v1"), api_key="sk-ant-test-not-a-key", max_retries=0)
    message = claude.messages.create(
        model="claude-test", system=SYSTEM, max_tokens=64, messages=[{"role": "user", "content": question}]
    )
    return {"responses": response.output_text, "anthropic": message.content[0].text}


@orp.agent("policy-anthropic-stream-agent")
def anthropic_stream_agent(question: str) -> str:
    """One Anthropic call through the ``messages.stream`` helper."""
    claude = anthropic.Anthropic(base_url=BASE_URL.removesuffix("/v1"), api_key="sk-ant-test-not-a-key", max_retries=0)
    with claude.messages.stream(
        model="claude-test", system=SYSTEM, max_tokens=64, messages=[{"role": "user", "content": question}]
    ) as stream:
        return "".join(stream.text_stream)


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    """Both SDK instrumentors on for this module, off afterwards."""
    instrumentors = [OpenAIInstrumentor(), AnthropicInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A fresh fake server the agents point at."""
    global BASE_URL, PROBE
    with FakeLLMServer() as fake:
        BASE_URL = fake.openai_url
        yield fake
    PROBE = False
    RAN.clear()


def record(agent: Any, question: str) -> str:
    """Run ``agent`` once and return the trace id of its run."""
    agent(question)
    orp.flush()
    name = agent.__otel_replay__["name"]
    with Store.open() as store:
        return next(s.trace_id for s in store.runs(agent=name, kind="original"))


def models_sent(server: FakeLLMServer, since: int) -> list[str]:
    return [body.get("model") for _, body in server.requests[since:]]


def test_whatif_calls_the_model_for_real_and_answers_tools_from_the_recording(
    home: Path, server: FakeLLMServer
) -> None:
    tid = record(weather_agent, "What is the weather in Paris?")
    assert RAN == ["Paris"] and server.count == 2

    same = orp.replay(tid, mode="whatif", reason="noise check", policy=ReplayPolicy(lab_id="lab-w"))
    assert same.outcome == "matched", same.divergences
    assert server.count == 4 and RAN == ["Paris"]  # two real model calls, the tool answered from the tape
    served = {s.name: s.attributes[semconv.REPLAY_SERVED] for s in same.replay.steps}
    assert served == {"openai.chat.completions": "executed", "get_weather": "recording"}
    assert same.tape == {"unused": [], "drift": [], "refused": [], "injected": []}

    terse = orp.replay(tid, mode="whatif", reason="try a smaller model", policy=ReplayPolicy(model="terse-mini"))
    assert models_sent(server, 4) == ["terse-mini"]  # one request, with the what-if model, no tool asked
    assert RAN == ["Paris"]
    assert terse.outcome == "diverged"
    assert terse.tape["unused"] == [{"tool": "get_weather", "step_index": 1}]
    assert {d.kind for d in terse.divergences} >= {"missing_call", "output"}
    assert "request" not in {d.kind for d in terse.divergences}  # whatif does not compare model requests
    assert terse.replay.steps[0].attributes[semconv.GEN_AI_REQUEST_MODEL] == "terse-mini"


def test_whatif_never_sends_a_redaction_marker(home: Path, server: FakeLLMServer) -> None:
    token = "ghp_" + "A1b2" * 9
    tid = record(weather_agent, f"My token is {token}, what is the weather in Paris?")
    before = server.count
    result = orp.replay(tid, mode="whatif", reason="marker check", policy=ReplayPolicy())
    assert result.outcome == "refused"
    assert "redaction marker" in (result.refusal or "") and result.refused_call["kind"] == "model"
    assert server.count == before  # nothing reached the model


def test_whatif_guard_lets_only_the_model_call_connect(home: Path, server: FakeLLMServer) -> None:
    global PROBE
    tid = record(weather_agent, "What is the weather in Paris?")
    PROBE = True
    result = orp.replay(tid, mode="whatif", reason="guard check", policy=ReplayPolicy())
    blocked = [d for d in result.divergences if d.kind == "side_effect"]
    assert len(blocked) == 1 and "network connection" in blocked[0].reason
    assert server.count == 4  # the two model calls went through, the agent's own connection did not


def test_a_changed_system_prompt_is_a_request_divergence_at_the_first_model_step(
    home: Path, server: FakeLLMServer
) -> None:
    tid = record(weather_agent, "What is the weather in Paris?")
    policy = ReplayPolicy(prompts={"system": "Answer in one word."})
    result = orp.replay(tid, mode="deterministic", policy=policy)
    first = result.first_divergence
    assert (first.kind, first.step_index) == ("request", 0)
    assert "+" in first.diff and "Answer in one word." in first.diff and SYSTEM in first.diff
    assert server.count == 2 and RAN == ["Paris"]
    mock = orp.replay(tid, mode="mock", policy=policy)  # answers anyway: the step records what it sent
    sent = mock.replay.steps[0].snapshots["model"]["request"]
    assert sent["messages"][0] == {"role": "system", "content": "Answer in one word."}
    assert [(d.kind, d.step_index) for d in mock.divergences if d.kind == "request"] == [("request", 0), ("request", 2)]

    params = orp.replay(tid, mode="mock", policy=ReplayPolicy(params={"temperature": 0}))
    assert params.first_divergence.kind == "request"
    assert params.replay.steps[0].snapshots["model"]["request"]["temperature"] == 0


def test_overrides_reach_responses_and_anthropic_requests(home: Path, server: FakeLLMServer) -> None:
    tid = record(multi_sdk_agent, "Hello there")
    assert server.count == 2
    policy = ReplayPolicy(model="terse-x", params={"metadata": {"user_id": "lab"}}, prompts={"system": "Be brief."})
    result = orp.replay(tid, mode="whatif", reason="override check", policy=policy)
    (_, responses), (_, messages) = server.requests[2:]
    lab = {"user_id": "lab"}
    assert (responses["model"], responses["instructions"], responses["metadata"]) == ("terse-x", "Be brief.", lab)
    assert (messages["model"], messages["system"], messages["metadata"]) == ("terse-x", "Be brief.", lab)
    assert result.replay is not None
    snapshot = result.replay.snapshots["output"]
    output = snapshot.get("structured") or snapshot.get("answer")
    assert output == {"responses": "terse: Hello", "anthropic": "terse: Hello"}
    assert any(d.kind == "output" for d in result.divergences)


def test_the_replay_command_accepts_whatif_with_a_reason(home: Path, server: FakeLLMServer) -> None:
    tid = record(weather_agent, "What is the weather in Paris?")
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]),
        "POLICY_FAKE_URL": server.openai_url,
    }
    cmd = [sys.executable, "-m", "otel_replay.cli", "replay", tid, "--mode", "whatif"]
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "reason" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert server.count == 2
    done = subprocess.run(
        [*cmd, "--reason", "cli whatif", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[:3000]
    data = json.loads(done.stdout)
    assert (data["mode"], data["reason"], data["outcome"]) == ("whatif", "cli whatif", "matched")
    assert server.count == 4 and RAN == ["Paris"]  # the two model calls, the tool from the recording


def test_overrides_reach_the_anthropic_stream_helper(home: Path, server: FakeLLMServer) -> None:
    tid = record(anthropic_stream_agent, "Hello stream")
    assert server.count == 1
    policy = ReplayPolicy(model="terse-s", prompts={"system": "Stream briefly."})
    result = orp.replay(tid, mode="whatif", reason="stream override check", policy=policy)
    ((_, body),) = server.requests[1:]
    assert (body["model"], body["system"], body["stream"]) == ("terse-s", "Stream briefly.", True)
    assert result.replay.snapshots["output"]["answer"] == "terse: Hello"
    mock = orp.replay(tid, mode="mock", policy=policy)  # answered from the recording, the request compared
    assert [d.kind for d in mock.divergences] == ["request"] and server.count == 2
