"""The OpenAI Agents SDK's tools example, recorded in one line or zero-code, replayed through the CLI in every mode.

The agent (``rw_openai_agents_agent.py``) runs as its users run it, against the fake OpenAI server (Responses API,
streamed or not; the server calls the first tool offered, ``send_forecast``, which appends a line to the outbox).
Each test asserts what a user sees: the runs and steps the CLI shows, the requests the server received, the lines
on disk, the replay's outcome, divergences and exit codes.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import Recordings

APP = "rw_openai_agents_agent:main"
SCRIPT = "rw_openai_agents_agent.py"
ENTRY_POINT = "otel_replay_openai_agents"


def _entry_point_shim(folder: Path) -> str | None:
    """A folder to put on ``PYTHONPATH`` that declares the ``otel_replay_openai_agents`` instrumentor entry point,
    when the installed otel-replay metadata predates it (the package is installed in editable mode); None when
    the installed metadata declares it already."""
    names = {e.name for e in importlib.metadata.entry_points(group="opentelemetry_instrumentor")}
    if ENTRY_POINT in names:
        return None
    info = folder / "otel_replay_openai_agents_entry-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: otel-replay-openai-agents-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        f"[opentelemetry_instrumentor]\n{ENTRY_POINT} = otel_replay.instrumentation.openai_agents:"
        "OpenAIAgentsInstrumentor\n"
    )
    return str(folder)


@pytest.fixture
def agents_world(shared_world: Any, tmp_path: Path) -> Any:
    """The real-world fixture on the module's server, with the SDK's own trace export replaced by the bridge
    (nothing goes to OpenAI). Tests that record the same invocation share one recording (``recordings``)."""
    world = shared_world
    world.env["OTEL_REPLAY_OPENAI_AGENTS_TRACING"] = "replace"
    world.env["OPENAI_AGENTS_DONT_LOG_MODEL_DATA"] = "1"
    shim = _entry_point_shim(tmp_path / "entry-points")
    if shim is not None:
        world.env["PYTHONPATH"] = os.pathsep.join((shim, world.env["PYTHONPATH"]))
    world.server.tool_args_for["send_forecast"] = {"city": "Tokyo"}
    return world


def _record(world: Any, recordings: Recordings, *, zero_code: bool = False, stream: bool = False) -> str:
    """Run the agent once (one recording per invocation and module, copied into this test's fresh home);
    returns the trace id of the one run it recorded."""
    before: set[str] = set()  # a fresh home
    extra = {"RW_ZERO_CODE": "1" if zero_code else "0", "RW_STREAM": "1" if stream else "0"}
    out = recordings.world(world, SCRIPT, zero_code=zero_code, **extra).out
    assert out.returncode == 0, out.stderr
    assert "The weather: forecast sent for Tokyo" in out.stdout
    new = [r for r in _originals(world) if r["trace_id"] not in before]
    assert len(new) == 1, f"one Runner.run must be one run, got {new}"
    return str(new[0]["trace_id"])


def _originals(world: Any) -> list[dict[str, Any]]:
    return [r for r in world.cli_json("runs") if r["kind"] == "original"]


def _steps(world: Any, trace_id: str) -> list[tuple[str, str]]:
    shown = world.cli_json("show", trace_id)
    return [(s["kind"], s["name"]) for s in shown["steps"]]


def _replay(world: Any, trace_id: str, *args: str, ok: tuple[int, ...] = (0,), **kwargs: Any) -> dict[str, Any]:
    return world.cli_json("replay", trace_id, "--app", APP, *args, ok=ok, **kwargs)


@pytest.mark.parametrize(
    ("zero_code", "stream"), [(False, False), (True, True)], ids=["run-one-line", "run-streamed-zero-code"]
)
def test_one_run_per_invocation_and_mock_and_deterministic_replays_touch_nothing(
    agents_world: Any, recordings: Recordings, zero_code: bool, stream: bool
) -> None:
    world = agents_world
    trace_id = _record(world, recordings, zero_code=zero_code, stream=stream)
    assert _steps(world, trace_id) == [
        ("model", "openai.responses"),
        ("tool", "send_forecast"),
        ("model", "openai.responses"),
    ]
    shown = world.cli_json("show", trace_id)
    assert shown["steps"][1]["attributes"]["otel_replay.tool.risk"] == "high"  # the name heuristic: send_…
    assert world.effects() == ["forecast for Tokyo"]
    requests, effects = world.server.count, world.effects()
    extra = {"RW_STREAM": "1" if stream else "0"}
    for mode in ("mock", "deterministic"):
        result = _replay(world, trace_id, "--mode", mode, extra_env=extra)
        assert result["outcome"] == "matched", result["divergences"]
        assert result["divergences"] == []
        changed = [name for name, section in result["diff"].items() if section["changed"]]
        assert changed in ([], ["latency"]), changed  # latency: the replay answers without a server
    assert world.server.count == requests, "a mock or deterministic replay sent a request to the server"
    assert world.effects() == effects, "a mock or deterministic replay ran the side-effecting tool"


def test_changed_instructions_dry_live_and_replay_tool_on_one_recorded_run(
    agents_world: Any, recordings: Recordings
) -> None:
    """One recorded run, replayed as a user checking a fix would: a changed instruction diverges at the first
    model step with a readable diff; dry names the tool that needs approval; live is refused without it;
    replay-tool re-runs the function tool only when approved; live with the approval on unchanged code
    matches."""
    world = agents_world
    trace_id = _record(world, recordings)
    requests = world.server.count

    changed = _replay(
        world,
        trace_id,
        "--mode",
        "deterministic",
        ok=(1,),
        extra_env={"RW_INSTRUCTIONS": "You are a terse weather agent."},
    )
    assert changed["outcome"] == "diverged"
    first = changed["first_divergence"]
    assert first["step_index"] == 0 and first["kind"] == "request"
    assert '-  "instructions": "You are a helpful agent."' in first["diff"]
    assert '+  "instructions": "You are a terse weather agent."' in first["diff"]

    dry = world.cli_json("replay", trace_id, "--mode", "dry")
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_forecast"]
    refused = _replay(world, trace_id, "--mode", "live", "--reason", "check the fix", ok=(2,))
    assert refused["outcome"] == "refused"
    assert "--approve send_forecast" in refused["refusal"]
    assert world.effects() == ["forecast for Tokyo"], "an unapproved high-risk function tool ran"
    assert refused["refused_before_start"] is True
    assert world.server.count == requests  # refused before the agent started: no model call went out
    requests = world.server.count

    mock = world.cli_json("replay-tool", trace_id, "--step", "1")
    assert (mock["tool"], mock["outcome"], mock["result"]) == ("send_forecast", "matched", "forecast sent for Tokyo")
    assert world.effects() == ["forecast for Tokyo"]
    refused = world.cli_json("replay-tool", trace_id, "--step", "1", "--mode", "live", "--reason", "retry", ok=(2,))
    assert refused["outcome"] == "refused"
    assert world.effects() == ["forecast for Tokyo"]
    live = world.cli_json(
        "replay-tool",
        trace_id,
        "--step",
        "1",
        "--mode",
        "live",
        "--reason",
        "retry",
        "--approve",
        "--args",
        '{"city": "Oslo"}',
        ok=(0, 1),
    )
    assert live["outcome"] == "diverged" and live["result"] == "forecast sent for Oslo"
    assert world.effects() == ["forecast for Tokyo", "forecast for Oslo"]
    assert world.server.count == requests

    result = _replay(
        world, trace_id, "--mode", "live", "--reason", "check the fix", "--approve", "send_forecast", ok=(0, 1)
    )
    assert world.server.count == requests + 2  # both model calls really made
    assert world.effects() == ["forecast for Tokyo", "forecast for Oslo", "forecast for Tokyo"]
    assert result["executions"] == {"send_forecast": 1}
    assert result["outcome"] == "matched", result["divergences"]
