"""A smolagents ``CodeAgent`` (model-written code calling a side-effecting tool, default executor), recorded with
one line (``orp.instrument("smolagents")``) and replayed through the CLI in every mode.

The agent (``rw_smolagents_agent.py``) runs as its users run it, against the fake OpenAI server, which answers
with a code blob in the CodeAgent's format: the code calls ``get_weather`` (a ``Tool`` subclass), then
``send_message`` (a ``@tool`` that appends a line to the outbox), then ``final_answer``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Recordings

APP = "rw_smolagents_agent:main"
SCRIPT = "rw_smolagents_agent.py"
CODE = (
    "Thought: I get the weather in Paris, then text it to Alice.\n<code>\n"
    'weather = get_weather(city="Paris")\n'
    'sent = send_message(to="Alice", text=weather)\n'
    "final_answer(sent)\n</code>"
)
SENT = "to Alice: sunny in Paris, 21C"


@pytest.fixture
def code_world(shared_world: Any) -> Any:
    """The module's world, its server answering the agent's task with the code blob above."""
    shared_world.server.chat_texts["Text Alice"] = [CODE]
    return shared_world


def _record(world: Any, recordings: Recordings) -> str:
    out = recordings.world(world, SCRIPT).out
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "message sent to Alice"
    runs = [r for r in world.cli_json("runs") if r["kind"] == "original"]
    assert len(runs) == 1, f"one agent.run must be one run, got {runs}"
    return str(runs[0]["trace_id"])


def _replay(world: Any, trace_id: str, *args: str, ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    return world.cli_json("replay", trace_id, "--app", APP, *args, ok=ok)


def test_code_agent_recorded_and_answered_in_mock_and_deterministic(code_world: Any, recordings: Recordings) -> None:
    world = code_world
    trace_id = _record(world, recordings)
    shown = world.cli_json("show", trace_id)
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    assert steps == [
        ("model", "openai.chat.completions", None),
        ("tool", "get_weather", "read"),
        ("tool", "send_message", "high"),  # the name rule: send_…
        ("tool", "final_answer", "read"),
    ]
    assert world.effects() == [SENT]
    requests = world.server.count
    for mode in ("mock", "deterministic"):
        result = _replay(world, trace_id, "--mode", mode)
        assert result["outcome"] == "matched", result["divergences"]
        assert result["divergences"] == []
    assert world.server.count == requests, "a mock or deterministic replay sent a request to the server"
    assert world.effects() == [SENT], "a mock or deterministic replay ran the side-effecting tool"


def test_dry_says_code_agent_and_live_needs_approval(code_world: Any, recordings: Recordings) -> None:
    world = code_world
    trace_id = _record(world, recordings)
    dry = world.cli_json("replay", trace_id, "--mode", "dry")
    assert dry["readiness"]["executes_code"] is True
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_message"]
    assert dry["not_firewalled"] == []  # every tool the code called is a step
    shown = world.cli("replay", trace_id, "--mode", "dry")
    assert "executes model-written code" in shown.stdout

    requests = world.server.count
    refused = _replay(world, trace_id, "--mode", "live", "--reason", "check", ok=(2,))
    assert refused["outcome"] == "refused"
    assert "--approve send_message" in refused["refusal"]
    assert world.server.count == requests and world.effects() == [SENT]

    live = _replay(world, trace_id, "--mode", "live", "--reason", "check", "--approve", "send_message")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.server.count == requests + 1
    assert world.effects() == [SENT, SENT]
