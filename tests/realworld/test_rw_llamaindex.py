"""LlamaIndex's ``FunctionAgent`` example, recorded with one line, replayed through the CLI in mock, deterministic,
dry and live modes.

The agent (``rw_llamaindex_agent.py``) runs as its users run it, streamed, against the fake OpenAI server (Chat
Completions; the server calls the first tool offered, ``send_forecast``, which appends a line to the outbox).
Its tools are plain functions: no otel-replay decorator. Each test asserts what a user sees: the runs and steps
the CLI shows, the requests the server received, the lines on disk, the replay's outcome and exit codes. Both
tests start from the same recording (made once for the module).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Recordings

APP = "rw_llamaindex_agent:main"
SCRIPT = "rw_llamaindex_agent.py"


@pytest.fixture
def llama_world(shared_world: Any) -> Any:
    """The real-world fixture on the module's server, which calls ``send_forecast`` for Tokyo."""
    shared_world.server.tool_args_for["send_forecast"] = {"city": "Tokyo"}
    return shared_world


def _record(world: Any, recordings: Recordings, *, zero_code: bool = False) -> str:
    """Run the agent once (one recording per module and way, copied into this test's fresh home); returns the
    trace id of the one run it recorded. ``zero_code``: under ``opentelemetry-instrument``, no otel-replay line."""
    out = recordings.world(world, SCRIPT, zero_code=zero_code, RW_ZERO_CODE="1" if zero_code else "0").out
    assert out.returncode == 0, out.stderr
    assert "The weather: forecast sent for Tokyo" in out.stdout
    runs = [r for r in world.cli_json("runs") if r["kind"] == "original"]
    assert len(runs) == 1, f"one agent.run must be one run, got {runs}"
    return str(runs[0]["trace_id"])


def _replay(world: Any, trace_id: str, *args: str, ok: tuple[int, ...] = (0,), **kwargs: Any) -> dict[str, Any]:
    return world.cli_json("replay", trace_id, "--app", APP, *args, ok=ok, **kwargs)


def test_one_run_with_model_and_tool_steps_and_mock_and_deterministic_replays_touch_nothing(
    llama_world: Any, recordings: Recordings
) -> None:
    world = llama_world
    trace_id = _record(world, recordings)
    shown = world.cli_json("show", trace_id)
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == [
        ("model", "openai.chat.completions"),
        ("tool", "send_forecast"),
        ("model", "openai.chat.completions"),
    ]
    tool = shown["steps"][1]["attributes"]
    assert tool["otel_replay.tool.risk"] == "high"  # the name heuristic: send_…
    assert tool["otel_replay.step.instrumentation"] == "llamaindex"
    assert world.effects() == ["forecast for Tokyo"]
    requests = world.server.count
    for mode in ("mock", "deterministic"):
        result = _replay(world, trace_id, "--mode", mode)
        assert result["outcome"] == "matched", result["divergences"]
        assert result["divergences"] == []
        changed = [name for name, section in result["diff"].items() if section["changed"]]
        assert changed in ([], ["latency"]), changed  # latency: the replay answers without a server
    assert world.server.count == requests, "a mock or deterministic replay sent a request to the server"
    assert world.effects() == ["forecast for Tokyo"], "a mock or deterministic replay ran the side-effecting tool"


def test_changed_prompt_diverges_dry_names_the_write_tool_and_live_needs_its_approval(
    llama_world: Any, recordings: Recordings
) -> None:
    world = llama_world
    trace_id = _record(world, recordings)
    requests = world.server.count

    # a replay's stop inside a workflow step ends the workflow (it does not wait forever) and is the divergence
    changed = _replay(
        world, trace_id, "--mode", "deterministic", ok=(1,), extra_env={"RW_INSTRUCTIONS": "You are terse."}
    )
    assert changed["outcome"] == "diverged"
    first = changed["first_divergence"]
    assert first["step_index"] == 0 and first["kind"] == "request"
    assert '+      "content": "You are terse.",' in first["diff"]
    assert changed["agent_error"] is None  # the stop reached `await handler` as itself, not as an agent error
    assert world.server.count == requests and world.effects() == ["forecast for Tokyo"]

    dry = world.cli_json("replay", trace_id, "--mode", "dry")
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_forecast"]

    refused = _replay(world, trace_id, "--mode", "live", "--reason", "check the fix", ok=(2,))
    assert refused["outcome"] == "refused"
    assert "--approve send_forecast" in refused["refusal"]
    assert refused["refused_before_start"] is True
    assert world.effects() == ["forecast for Tokyo"], "an unapproved high-risk tool ran"
    assert world.server.count == requests  # refused before the agent started: no model call went out

    result = _replay(world, trace_id, "--mode", "live", "--reason", "check the fix", "--approve", "send_forecast")
    assert result["outcome"] == "matched", result["divergences"]
    assert result["executions"] == {"send_forecast": 1}
    assert world.server.count == requests + 2  # both model calls really made
    assert world.effects() == ["forecast for Tokyo", "forecast for Tokyo"]


def test_zero_code_recording_has_the_same_steps_and_replays(llama_world: Any, recordings: Recordings) -> None:
    """No otel-replay line: ``opentelemetry-instrument`` finds the ``otel_replay_llamaindex`` entry point, which
    arms the LlamaIndex instrumentor (and the OpenAI one under it)."""
    world = llama_world
    trace_id = _record(world, recordings, zero_code=True)
    shown = world.cli_json("show", trace_id)
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == [
        ("model", "openai.chat.completions"),
        ("tool", "send_forecast"),
        ("model", "openai.chat.completions"),
    ]
    requests = world.server.count
    result = _replay(world, trace_id, "--mode", "mock")
    assert result["outcome"] == "matched", result["divergences"]
    assert world.server.count == requests and world.effects() == ["forecast for Tokyo"]
