"""LlamaIndex's ``FunctionAgent`` example, recorded with one line, replayed through the CLI in mock, deterministic,
dry and live modes.

The agent (``rw_llamaindex_agent.py``) runs as its users run it, streamed, against the fake OpenAI server (Chat
Completions; the server calls the first tool offered, ``send_forecast``, which appends a line to the outbox).
Its tools are plain functions: no otel-replay decorator; the ``test_decorated_…`` tests run the same program with
``@orp.tool`` tools and an ``@orp.agent`` entry (``RW_DECORATE=1``). Each test asserts what a user sees: the runs
and steps the CLI shows, the requests the server received, the lines on disk, the replay's outcome and exit
codes. Tests of one setup start from the same recording (made once for the module).
"""

from __future__ import annotations

from pathlib import Path
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
    # whatif: the models answer for real (both calls reach the server), the tool is answered from the recording
    whatif = _replay(world, trace_id, "--mode", "whatif", "--reason", "the same model, live")
    assert whatif["outcome"] == "matched", whatif["divergences"]
    assert whatif["executions"] == {}
    assert world.server.count == requests + 2
    assert world.effects() == ["forecast for Tokyo"], "a whatif replay ran the side-effecting tool"


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
    # replayed with no otel-replay line either: the replay instruments what the recording was recorded through
    zero = {"RW_ZERO_CODE": "1"}
    requests = world.server.count
    for mode in ("mock", "deterministic"):
        result = _replay(world, trace_id, "--mode", mode, extra_env=zero)
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert world.server.count == requests and world.effects() == ["forecast for Tokyo"]
    dry = _replay(world, trace_id, "--mode", "dry", extra_env=zero)
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_forecast"]  # the name rule's high
    live = _replay(world, trace_id, "--mode", "live", "--reason", "check", "--approve", "send_forecast", extra_env=zero)
    assert live["outcome"] == "matched", live["divergences"]
    assert live["executions"] == {"send_forecast": 1}
    assert world.server.count == requests + 2
    assert world.effects() == ["forecast for Tokyo", "forecast for Tokyo"]


# The decorated setup of the same program (RW_DECORATE=1): the tools are @orp.tool(risk=...) functions and `main`
# an @orp.agent, so the run begins there and a replay needs no --app. send_forecast also writes to the temp folder
# (RW_TEMP_EFFECT=1): the replays get a temp folder of their own (TMPDIR), the outbox stays outside it.
DECORATED = {"RW_DECORATE": "1", "RW_TEMP_EFFECT": "1"}


@pytest.fixture(scope="module")
def recording_tmp(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The temp folder of the module's decorated recording (the same for every test: one recording)."""
    return str(tmp_path_factory.mktemp("recording-tmp"))


@pytest.fixture
def decorated(llama_world: Any, recordings: Recordings, recording_tmp: str, tmp_path: Path) -> tuple[Any, str, Path]:
    """The world with the decorated program's one recording in it, its trace id and the replays' temp folder."""
    world = llama_world
    out = recordings.world(world, SCRIPT, RW_ZERO_CODE="0", TMPDIR=recording_tmp, **DECORATED).out
    assert out.returncode == 0, out.stderr
    assert "The weather: forecast sent for Tokyo" in out.stdout
    assert (Path(recording_tmp) / "forecasts.txt").read_text() == "forecast for Tokyo\n"
    (run,) = [r for r in world.cli_json("runs") if r["kind"] == "original"]
    replay_tmp = tmp_path / "replay-tmp"
    replay_tmp.mkdir()
    return world, str(run["trace_id"]), replay_tmp


def _replay_decorated(
    world: Any, trace_id: str, replay_tmp: Path, *args: str, ok: tuple[int, ...] = (0,), **env: str
) -> dict[str, Any]:
    """``otel-replay replay TRACE ARGS --json`` of the decorated program: no --app, its own temp folder."""
    extra_env = {**DECORATED, "TMPDIR": str(replay_tmp), **env}
    return world.cli_json("replay", trace_id, *args, ok=ok, extra_env=extra_env)


def test_decorated_run_begins_at_the_agent_and_mock_deterministic_and_from_step_replays_touch_nothing(
    decorated: tuple[Any, str, Path],
) -> None:
    world, trace_id, replay_tmp = decorated
    shown = world.cli_json("show", trace_id)
    assert shown["agent"] == "weather-forecaster" and shown["entrypoint"].endswith(":main")
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    assert steps == [
        ("model", "openai.chat.completions", None),
        ("tool", "send_forecast", "write"),  # the decorator's risk, not the name rule's high
        ("model", "openai.chat.completions", None),
    ]
    assert "otel_replay.step.instrumentation" not in shown["steps"][1]["attributes"]  # recorded once, by @orp.tool
    requests = world.server.count
    for args in (("--mode", "mock"), ("--mode", "deterministic"), ("--mode", "mock", "--from-step", "2")):
        result = _replay_decorated(world, trace_id, replay_tmp, *args)
        assert result["outcome"] == "matched", (args, result["divergences"])
        assert result["executions"] == {}
    assert result["from_step"] == 2
    # one decorated tool step replayed on its own (the write tool, offline: answered, nothing written)
    tool = world.cli_json(
        "replay-tool", trace_id, "--step", "1", "--mode", "mock", extra_env={**DECORATED, "TMPDIR": str(replay_tmp)}
    )
    assert (tool["tool"], tool["outcome"], tool["result"]) == ("send_forecast", "matched", "forecast sent for Tokyo")
    assert world.server.count == requests, "a mock or deterministic replay sent a request to the server"
    assert world.effects() == ["forecast for Tokyo"], "a replay wrote outside its temp folder"
    assert list(replay_tmp.iterdir()) == [], "a replay ran the side-effecting tool inside its temp folder"


def test_decorated_changed_prompt_diverges_and_live_runs_the_write_tool_once_approved(
    decorated: tuple[Any, str, Path],
) -> None:
    world, trace_id, replay_tmp = decorated
    requests = world.server.count
    changed = _replay_decorated(
        world, trace_id, replay_tmp, "--mode", "deterministic", ok=(1,), RW_INSTRUCTIONS="You are terse."
    )
    assert changed["outcome"] == "diverged" and changed["agent_error"] is None
    first = changed["first_divergence"]
    assert first["step_index"] == 0 and first["kind"] == "request"
    assert '+      "content": "You are terse.",' in first["diff"]

    dry = _replay_decorated(world, trace_id, replay_tmp, "--mode", "dry")
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_forecast"]

    refused = _replay_decorated(world, trace_id, replay_tmp, "--mode", "live", "--reason", "check", ok=(2,))
    assert refused["outcome"] == "refused" and refused["refused_before_start"] is True
    assert "--approve send_forecast" in refused["refusal"]
    assert world.server.count == requests
    assert world.effects() == ["forecast for Tokyo"] and list(replay_tmp.iterdir()) == []

    live = _replay_decorated(
        world, trace_id, replay_tmp, "--mode", "live", "--reason", "check", "--approve", "send_forecast"
    )
    assert live["outcome"] == "matched", live["divergences"]
    assert live["executions"] == {"send_forecast": 1}
    assert world.server.count == requests + 2
    assert world.effects() == ["forecast for Tokyo", "forecast for Tokyo"]
    assert (replay_tmp / "forecasts.txt").read_text() == "forecast for Tokyo\n"


def test_decorated_zero_code_recording_replays_in_every_mode(
    llama_world: Any, recordings: Recordings, recording_tmp: str, tmp_path: Path
) -> None:
    """The decorated program with no otel-replay instrument line, under ``opentelemetry-instrument``: the
    ``@orp.tool`` steps and the ``@orp.agent`` run are the same, and so are the replays (none with the line)."""
    world = llama_world
    env = {**DECORATED, "RW_ZERO_CODE": "1"}
    out = recordings.world(world, SCRIPT, zero_code=True, TMPDIR=recording_tmp, **env).out
    assert out.returncode == 0, out.stderr
    (run,) = [r for r in world.cli_json("runs") if r["kind"] == "original"]
    trace_id = str(run["trace_id"])
    shown = world.cli_json("show", trace_id)
    assert shown["agent"] == "weather-forecaster"
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    assert steps == [
        ("model", "openai.chat.completions", None),
        ("tool", "send_forecast", "write"),
        ("model", "openai.chat.completions", None),
    ]
    replay_tmp = tmp_path / "replay-tmp"
    replay_tmp.mkdir()
    requests = world.server.count
    for args in (("--mode", "mock"), ("--mode", "deterministic"), ("--mode", "mock", "--from-step", "2")):
        result = _replay_decorated(world, trace_id, replay_tmp, *args, RW_ZERO_CODE="1")
        assert result["outcome"] == "matched", (args, result["divergences"])
        assert result["executions"] == {}
    assert world.server.count == requests
    assert world.effects() == ["forecast for Tokyo"] and list(replay_tmp.iterdir()) == []
    dry = _replay_decorated(world, trace_id, replay_tmp, "--mode", "dry", RW_ZERO_CODE="1")
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_forecast"]
    approved = ("--mode", "live", "--reason", "check", "--approve", "send_forecast")
    live = _replay_decorated(world, trace_id, replay_tmp, *approved, RW_ZERO_CODE="1")
    assert live["outcome"] == "matched", live["divergences"]
    assert live["executions"] == {"send_forecast": 1}
    assert world.server.count == requests + 2
    assert (replay_tmp / "forecasts.txt").read_text() == "forecast for Tokyo\n"
