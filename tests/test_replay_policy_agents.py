"""A replay policy's model overrides on an OpenAI Agents SDK agent (a real ``agents.Agent`` run by
``Runner.run`` / ``Runner.run_streamed``), against the project's fake OpenAI-compatible server.

The SDK's model calls are the ``openai`` client's (Responses by default, Chat Completions with
``OpenAIChatCompletionsModel``), recorded and answered by the OpenAI instrumentor; the agent's ``instructions``
are the system prompt the SDK sends (``instructions=`` of a Responses request, the first ``system`` message of
a Chat Completions one). A whatif replay must send the overridden model and system prompt (the fake server's
request log is the proof), and a deterministic replay with a changed system prompt must diverge at the first
model step without calling the server. The SDK's own tracing is bridged (nothing is exported to OpenAI).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from agents.tracing import get_trace_provider
from fake_llm_servers import FakeLLMServer
from openai import AsyncOpenAI

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.openai import OpenAIInstrumentor
from otel_replay.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from otel_replay.replay.matching.policy import ReplayPolicy
from otel_replay.storage.store import Store

INSTRUCTIONS = "You forecast the weather. Use the tool."
SERVER: dict[str, FakeLLMServer] = {}
RAN: list[str] = []
"""Every real execution of the tool."""
STEP = {"responses": "openai.responses", "chat": "openai.chat.completions"}


@function_tool
def get_forecast(city: str) -> str:
    """The forecast for a city."""
    RAN.append(city)
    return f"sunny in {city}"


def forecaster(api: str) -> Agent:
    """The agent, its model on the fake server through the Responses or the Chat Completions API."""
    client = AsyncOpenAI(base_url=SERVER["fake"].openai_url, api_key="sk-test-" + "5" * 32, max_retries=0)
    model: Any = (
        OpenAIResponsesModel(model="gpt-fake", openai_client=client)
        if api == "responses"
        else OpenAIChatCompletionsModel(model="gpt-fake", openai_client=client)
    )
    return Agent(name=f"forecaster-{api}", instructions=INSTRUCTIONS, tools=[get_forecast], model=model)


async def ask_responses(input: str) -> Any:  # noqa: A002 - the implicit run records Runner.run's input
    """``--app`` entrypoint: ``Runner.run`` of the Responses agent."""
    return (await Runner.run(forecaster("responses"), input=input)).final_output


async def ask_chat(input: str) -> Any:  # noqa: A002
    """``--app`` entrypoint: ``Runner.run`` of the Chat Completions agent."""
    return (await Runner.run(forecaster("chat"), input=input)).final_output


async def ask_streamed(input: str) -> Any:  # noqa: A002
    """``--app`` entrypoint: ``Runner.run_streamed`` of the Responses agent, its events consumed."""
    streamed = Runner.run_streamed(forecaster("responses"), input=input)
    async for _event in streamed.stream_events():
        pass
    return streamed.final_output


ENTRY = {"responses": ask_responses, "chat": ask_chat, "streamed": ask_streamed}


@pytest.fixture
def server(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    """The fake server, both instrumentors on (the SDK's tracing bridged, its own processors set aside)."""
    monkeypatch.setenv("OPENAI_AGENTS_DONT_LOG_MODEL_DATA", "1")
    provider = get_trace_provider()
    before = list(provider._multi_processor._processors)
    provider.set_processors([])
    openai_instrumentor = OpenAIInstrumentor()
    agents_instrumentor = OpenAIAgentsInstrumentor()
    with FakeLLMServer(tool_args_for={"get_forecast": {"city": "Rome"}}) as fake:
        SERVER["fake"] = fake
        openai_instrumentor.instrument()
        agents_instrumentor.instrument(tracing="bridge")
        try:
            yield fake
        finally:
            agents_instrumentor.uninstrument()
            openai_instrumentor.uninstrument()
            provider.set_processors(before)
            SERVER.clear()
            RAN.clear()


def record(kind: str) -> orp.Run:
    """Run the agent once; its recorded run."""
    asyncio.run(ENTRY[kind]("Rome forecast please"))
    orp.flush()
    api = "chat" if kind == "chat" else "responses"
    with Store.open() as store:
        (summary,) = store.runs(agent=f"forecaster-{api}", kind="original")
        return store.load_run(summary.trace_id)


def system_prompt(path: str, body: dict[str, Any]) -> Any:
    """The system prompt a request carries: Responses ``instructions``, else the Chat ``system`` message."""
    if path.endswith("/responses"):
        return body.get("instructions")
    return next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), None)


@pytest.mark.parametrize("kind", ["responses", "chat", "streamed"])
def test_whatif_sends_the_overridden_model_and_instructions(server: FakeLLMServer, kind: str) -> None:
    run = record(kind)
    model_steps = [s for s in run.steps if s.kind == "model"]
    step = STEP["chat" if kind == "chat" else "responses"]
    assert [(s.kind, s.name) for s in run.steps][:2] == [("model", step), ("tool", "get_forecast")]
    assert RAN == ["Rome"] and server.count == 2
    assert [system_prompt(p, b) for p, b in server.requests] == [INSTRUCTIONS] * 2

    entry = f"test_replay_policy_agents:{ENTRY[kind].__name__}"
    policy = ReplayPolicy(model="terse-agents", params={"temperature": 0}, prompts={"system": "Answer in one word."})
    result = orp.replay(run.trace_id, mode="whatif", reason="agents override check", policy=policy, entrypoint=entry)
    ((path, body),) = server.requests[2:]  # one real call: the terse model asks for no tool
    assert (body["model"], body["temperature"], system_prompt(path, body)) == ("terse-agents", 0, "Answer in one word.")
    assert result.replay.snapshots["output"]["answer"] == "terse: Rome"
    assert RAN == ["Rome"]  # the tool never ran again
    assert result.tape["unused"] == [{"tool": "get_forecast", "step_index": 1}]
    (replayed,) = [s for s in result.replay.steps if s.kind == "model"]
    assert replayed.attributes[semconv.REPLAY_SERVED] == "executed"
    assert replayed.attributes[semconv.GEN_AI_REQUEST_MODEL] == "terse-agents"

    changed = ReplayPolicy(prompts={"system": "You forecast in haiku."})
    deterministic = orp.replay(run.trace_id, mode="deterministic", policy=changed, entrypoint=entry)
    first = deterministic.first_divergence
    assert (first.kind, first.step_index) == ("request", model_steps[0].index)
    assert "You forecast in haiku." in (first.diff or "") and INSTRUCTIONS in (first.diff or "")
    assert deterministic.outcome == "diverged" and server.count == 3  # answered from the recording
    assert RAN == ["Rome"]

    unchanged = orp.replay(run.trace_id, mode="deterministic", policy=ReplayPolicy(), entrypoint=entry)
    assert unchanged.outcome == "matched", unchanged.divergences
    assert server.count == 3


def test_a_lab_with_a_prompt_file_diverges_at_the_first_model_step(server: FakeLLMServer, tmp_path: Path) -> None:
    run = record("responses")
    prompt = tmp_path / "system.txt"
    prompt.write_text("You forecast in haiku.", encoding="utf-8")
    entry = "test_replay_policy_agents:ask_responses"

    lab = orp.lab(trace_ids=[run.trace_id], app=entry, prompt_files={"system": str(prompt)}, workers=1)
    ((pair),) = lab.pairs
    first = pair.first_divergence or {}
    assert (first["kind"], first["step_index"], first["step_name"]) == ("request", 0, "openai.responses")
    assert server.count == 2 and RAN == ["Rome"]  # deterministic: nothing sent, nothing run

    whatif = orp.lab(
        trace_ids=[run.trace_id], app=entry, mode="whatif", model="terse-lab", reason="agents lab", workers=1
    )
    assert [b["model"] for _, b in server.requests[2:]] == ["terse-lab"]
    assert whatif.pairs[0].tape["unused"] == [{"tool": "get_forecast", "step_index": 1}]
    assert RAN == ["Rome"]
