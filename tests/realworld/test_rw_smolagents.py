"""A smolagents ``CodeAgent`` (model-written code calling a side-effecting tool, default executor), recorded with
one line (``orp.instrument("smolagents")``) and replayed through the CLI in every mode.

The agent (``rw_smolagents_agent.py``) runs as its users run it, against the fake OpenAI server, which answers
with a code blob in the CodeAgent's format: the code calls ``get_weather`` (a ``Tool`` subclass), then
``send_message`` (a ``@tool`` that appends a line to the outbox), then ``final_answer``. The
``test_decorated_…`` tests run the same program with ``@orp.tool`` tools and an ``@orp.agent`` entry
(``RW_DECORATE=1``).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
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
INSTRUMENTATION = "otel_replay.step.instrumentation"


@pytest.fixture
def code_world(shared_world: Any) -> Any:
    """The module's world, its server answering the agent's task with the code blob above."""
    shared_world.server.chat_texts["Text Alice"] = [CODE]
    return shared_world


def _entry_point_shim(folder: Path) -> str | None:
    """A folder for ``PYTHONPATH`` declaring the ``otel_replay_smolagents`` entry point when the installed
    (editable) otel-replay metadata predates it; None when it declares it already."""
    if "otel_replay_smolagents" in {
        e.name for e in importlib.metadata.entry_points(group="opentelemetry_instrumentor")
    }:
        return None
    info = folder / "otel_replay_smolagents_entry-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: otel-replay-smolagents-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[opentelemetry_instrumentor]\notel_replay_smolagents = otel_replay.instrumentation.entry_points:smolagents\n"
    )
    return str(folder)


def _record(world: Any, recordings: Recordings, *, zero_code: bool = False) -> str:
    out = recordings.world(world, SCRIPT, zero_code=zero_code, RW_ZERO_CODE="1" if zero_code else "0").out
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
    # whatif: the model answers for real, its new code's tool calls are answered from the recording
    whatif = _replay(world, trace_id, "--mode", "whatif", "--reason", "the same model, live")
    assert whatif["outcome"] == "matched", whatif["divergences"]
    assert whatif["executions"] == {}
    assert world.server.count == requests + 1
    assert world.effects() == [SENT], "a whatif replay ran the side-effecting tool"


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

    tool = world.cli("replay-tool", trace_id, "--step", "2")  # not supported for smolagents tools: refused
    assert tool.returncode == 2, tool.stdout + tool.stderr
    assert world.effects() == [SENT]

    live = _replay(world, trace_id, "--mode", "live", "--reason", "check", "--approve", "send_message")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.server.count == requests + 1
    assert world.effects() == [SENT, SENT]


def test_zero_code_recording_has_the_same_steps(code_world: Any, recordings: Recordings, tmp_path: Path) -> None:
    """No otel-replay line: ``opentelemetry-instrument`` finds the ``otel_replay_smolagents`` entry point."""
    world = code_world
    shim = _entry_point_shim(tmp_path / "entry-points")
    if shim is not None:
        world.env["PYTHONPATH"] = os.pathsep.join((shim, world.env["PYTHONPATH"]))
    trace_id = _record(world, recordings, zero_code=True)
    shown = world.cli_json("show", trace_id)
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == [
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("tool", "send_message"),
        ("tool", "final_answer"),
    ]
    # replayed with no otel-replay line either: the replay instruments what the recording was recorded through
    zero = {"RW_ZERO_CODE": "1"}
    requests = world.server.count
    for mode in ("mock", "deterministic"):
        result = world.cli_json("replay", trace_id, "--app", APP, "--mode", mode, extra_env=zero)
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert world.server.count == requests and world.effects() == [SENT]
    dry = world.cli_json("replay", trace_id, "--app", APP, "--mode", "dry", extra_env=zero)
    assert dry["readiness"]["executes_code"] is True and dry["not_firewalled"] == []
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_message"]
    approved = ("--mode", "live", "--reason", "check", "--approve", "send_message")
    live = world.cli_json("replay", trace_id, "--app", APP, *approved, extra_env=zero)
    assert live["outcome"] == "matched", live["divergences"]
    assert world.server.count == requests + 1 and world.effects() == [SENT, SENT]


# The decorated setup of the same program (RW_DECORATE=1): the tools are @orp.tool(risk=...) functions (the @tool's
# function, the Tool subclass's forward) and `main` an @orp.agent, so the run begins there and a replay needs no
# --app. send_message also writes to the temp folder (RW_TEMP_EFFECT=1): the replays get a temp folder of their
# own (TMPDIR), the outbox stays outside it.
DECORATED = {"RW_DECORATE": "1", "RW_TEMP_EFFECT": "1"}


@pytest.fixture(scope="module")
def recording_tmp(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The temp folder of the module's decorated recording (the same for every test: one recording)."""
    return str(tmp_path_factory.mktemp("recording-tmp"))


@pytest.fixture
def decorated(code_world: Any, recordings: Recordings, recording_tmp: str, tmp_path: Path) -> tuple[Any, str, Path]:
    """The world with the decorated program's one recording in it, its trace id and the replays' temp folder."""
    world = code_world
    out = recordings.world(world, SCRIPT, RW_ZERO_CODE="0", TMPDIR=recording_tmp, **DECORATED).out
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "message sent to Alice"
    assert (Path(recording_tmp) / "messages.txt").read_text() == SENT + "\n"
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
    assert shown["agent"] == "messenger" and shown["entrypoint"].endswith(":main")
    steps = [
        (s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk"), s["attributes"].get(INSTRUMENTATION))
        for s in shown["steps"]
    ]
    assert steps == [
        ("model", "openai.chat.completions", None, "openai"),
        ("tool", "get_weather", "read", None),  # recorded once, by the @orp.tool forward
        ("tool", "send_message", "write", None),  # the decorator's risk, not the name rule's high
        ("tool", "final_answer", "read", "smolagents"),  # smolagents' own tool, recorded by the instrumentor
    ]
    requests = world.server.count
    for args in (("--mode", "mock"), ("--mode", "deterministic"), ("--mode", "mock", "--from-step", "2")):
        result = _replay_decorated(world, trace_id, replay_tmp, *args)
        assert result["outcome"] == "matched", (args, result["divergences"])
        assert result["executions"] == {}
    assert result["from_step"] == 2
    # one decorated tool step re-run on its own: the @orp.tool function, imported from the program
    tool = world.cli_json(
        "replay-tool", trace_id, "--step", "1", "--mode", "mock", extra_env={**DECORATED, "TMPDIR": str(replay_tmp)}
    )
    assert (tool["tool"], tool["outcome"], tool["result"]) == ("get_weather", "matched", "sunny in Paris, 21C"), tool
    assert tool["error"] is None and tool["replay_trace_id"]
    assert world.server.count == requests, "a mock or deterministic replay sent a request to the server"
    assert world.effects() == [SENT], "a replay wrote outside its temp folder"
    assert list(replay_tmp.iterdir()) == [], "a replay ran the side-effecting tool inside its temp folder"


def test_decorated_changed_prompt_diverges_and_live_runs_the_write_tool_once_approved(
    decorated: tuple[Any, str, Path],
) -> None:
    world, trace_id, replay_tmp = decorated
    requests = world.server.count
    changed = _replay_decorated(
        world, trace_id, replay_tmp, "--mode", "deterministic", ok=(1,), RW_INSTRUCTIONS="Answer in French."
    )
    assert changed["outcome"] == "diverged" and changed["agent_error"] is None
    first = changed["first_divergence"]
    assert first["step_index"] == 0 and first["kind"] == "request"
    assert "+Answer in French." in first["diff"].splitlines()  # the system prompt's new line

    dry = _replay_decorated(world, trace_id, replay_tmp, "--mode", "dry")
    assert dry["readiness"]["executes_code"] is True
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_message"]
    assert dry["not_firewalled"] == []

    refused = _replay_decorated(world, trace_id, replay_tmp, "--mode", "live", "--reason", "check", ok=(2,))
    assert refused["outcome"] == "refused" and refused["refused_before_start"] is True
    assert "--approve send_message" in refused["refusal"]
    assert world.server.count == requests
    assert world.effects() == [SENT] and list(replay_tmp.iterdir()) == []

    live = _replay_decorated(
        world, trace_id, replay_tmp, "--mode", "live", "--reason", "check", "--approve", "send_message"
    )
    assert live["outcome"] == "matched", live["divergences"]
    assert live["executions"] == {"send_message": 1}
    assert world.server.count == requests + 1
    assert world.effects() == [SENT, SENT]
    assert (replay_tmp / "messages.txt").read_text() == SENT + "\n"


def test_decorated_zero_code_recording_replays_in_every_mode(
    code_world: Any, recordings: Recordings, recording_tmp: str, tmp_path: Path
) -> None:
    """The decorated program with no otel-replay instrument line, under ``opentelemetry-instrument``: the
    ``@orp.tool`` steps and the ``@orp.agent`` run are the same, and so are the replays (none with the line)."""
    world = code_world
    shim = _entry_point_shim(tmp_path / "entry-points")
    if shim is not None:
        world.env["PYTHONPATH"] = os.pathsep.join((shim, world.env["PYTHONPATH"]))
    out = recordings.world(world, SCRIPT, zero_code=True, TMPDIR=recording_tmp, RW_ZERO_CODE="1", **DECORATED).out
    assert out.returncode == 0, out.stderr
    (run,) = [r for r in world.cli_json("runs") if r["kind"] == "original"]
    trace_id = str(run["trace_id"])
    shown = world.cli_json("show", trace_id)
    assert shown["agent"] == "messenger"
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    assert steps == [
        ("model", "openai.chat.completions", None),
        ("tool", "get_weather", "read"),
        ("tool", "send_message", "write"),
        ("tool", "final_answer", "read"),
    ]
    replay_tmp = tmp_path / "replay-tmp"
    replay_tmp.mkdir()
    requests = world.server.count
    for args in (("--mode", "mock"), ("--mode", "deterministic"), ("--mode", "mock", "--from-step", "2")):
        result = _replay_decorated(world, trace_id, replay_tmp, *args, RW_ZERO_CODE="1")
        assert result["outcome"] == "matched", (args, result["divergences"])
        assert result["executions"] == {}
    assert world.server.count == requests
    assert world.effects() == [SENT] and list(replay_tmp.iterdir()) == []
    dry = _replay_decorated(world, trace_id, replay_tmp, "--mode", "dry", RW_ZERO_CODE="1")
    assert dry["readiness"]["executes_code"] is True
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["send_message"]
    approved = ("--mode", "live", "--reason", "check", "--approve", "send_message")
    live = _replay_decorated(world, trace_id, replay_tmp, *approved, RW_ZERO_CODE="1")
    assert live["outcome"] == "matched", live["divergences"]
    assert live["executions"] == {"send_message": 1}
    assert world.server.count == requests + 1
    assert world.effects() == [SENT, SENT]
    assert (replay_tmp / "messages.txt").read_text() == SENT + "\n"
