"""A Pydantic AI agent as its docs write one (``rw_pydantic_ai_agent.py``: ``Agent("openai:...")``,
``@agent.tool_plain`` tools with no otel-replay decorator, ``run_sync``), recorded with ``orp.instrument()`` and
replayed through the CLI in every mode against the fake OpenAI server (Responses API, fresh ids per answer).
``book_table`` appends a line to the outbox and declares ``write`` in its metadata."""

from __future__ import annotations

from typing import Any

import pydantic_ai  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
from conftest import RealWorld

SCRIPT = "rw_pydantic_ai_agent.py"
APP = "rw_pydantic_ai_agent:agent.run_sync"
BOOKED = "Ada: 2"


@pytest.fixture
def desk(world: RealWorld) -> RealWorld:
    world.server.tool_args_for["book_table"] = {"name": "Ada", "seats": 2}
    return world


def test_tools_without_decorators_are_steps_and_every_mode_replays(desk: RealWorld) -> None:
    world = desk
    out = world.run_agent(SCRIPT)
    assert out.returncode == 0, out.stderr
    assert "booked a table for 2 under Ada" in out.stdout
    assert world.effects() == [BOOKED]
    (run,) = world.cli_json("runs")  # one run_sync, one run
    assert (run["agent"], run["status"]) == ("restaurant-desk", "ok")
    trace_id, requests = run["trace_id"], world.server.count
    shown = world.cli_json("show", trace_id)
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    assert steps == [
        ("model", "openai.responses", None),
        ("tool", "book_table", "write"),
        ("model", "openai.responses", None),
    ]
    assert shown["snapshots"]["input"]["kwargs"] == {"user_prompt": "a table for 2 under Ada, please"}

    def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
        return world.cli_json("replay", trace_id, "--mode", mode, "--app", APP, *args, ok=ok, extra_env=env)

    assert replay("dry")["readiness"]["modes"]["live"]["needs_approval"] == ["book_table"]
    for mode in ("mock", "deterministic"):  # the run's output is AgentRunResult.output, on both sides
        result = replay(mode)
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert (world.server.count, world.effects()) == (requests, [BOOKED])  # offline: no request, no booking
    assert "book_table" in replay("live", "--reason", "verify", ok=(2,))["refusal"]
    live = replay("live", "--reason", "verify", "--approve", "book_table")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.effects() == [BOOKED, BOOKED]
    changed = replay("deterministic", ok=(1,), RW_INSTRUCTIONS="Be terse.")
    first = changed["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 0)
    assert '+  "instructions": "Be terse.",' in first["diff"], first["diff"]

    # Pydantic AI's own OpenTelemetry instrumentation on as well: its spans add no run and no step
    again = world.run_agent(SCRIPT, extra_env={"RW_PYDANTIC_OTEL": "1"})
    assert again.returncode == 0, again.stderr
    originals = [r for r in world.cli_json("runs") if r["kind"] == "original"]
    assert [(r["agent"], r["step_count"]) for r in originals] == [("restaurant-desk", 3)] * 2, originals
    newest = originals[0]["trace_id"]
    mock = world.cli_json("replay", newest, "--mode", "mock", "--app", APP, extra_env={"RW_PYDANTIC_OTEL": "1"})
    assert mock["outcome"] == "matched", mock["divergences"]


@pytest.mark.parametrize(("shape", "app"), [("run_stream", "ask_stream"), ("iter", "ask_iter")])
def test_run_stream_and_iter_are_runs_and_replay(desk: RealWorld, shape: str, app: str) -> None:
    world = desk
    out = world.run_agent(SCRIPT, extra_env={"RW_SHAPE": shape})
    assert out.returncode == 0, out.stderr
    assert "booked a table for 2 under Ada" in out.stdout
    assert world.effects() == [BOOKED]
    (run,) = world.cli_json("runs")  # one run from entering the context manager to leaving it
    assert (run["agent"], run["status"]) == ("restaurant-desk", "ok")
    shown = world.cli_json("show", run["trace_id"])
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == [
        ("model", "openai.responses"),
        ("tool", "book_table"),
        ("model", "openai.responses"),
    ]
    requests = world.server.count
    for mode in ("mock", "deterministic"):
        result = world.cli_json(
            "replay",
            run["trace_id"],
            "--mode",
            mode,
            "--app",
            f"rw_pydantic_ai_agent:{app}",
            extra_env={"RW_SHAPE": shape},
        )
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert (world.server.count, world.effects()) == (requests, [BOOKED])


def test_zero_code_recording_has_the_same_steps_and_replays_offline(desk: RealWorld) -> None:
    """Under ``opentelemetry-instrument`` with no otel-replay line (the entry points of Pydantic AI and of the
    openai client): the same run, ``book_table`` ``write`` from its metadata, and an offline replay matches."""
    trace_id, shown = desk.record_zero_code(SCRIPT)
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    assert steps == [
        ("model", "openai.responses", None),
        ("tool", "book_table", "write"),
        ("model", "openai.responses", None),
    ]
    assert desk.effects() == [BOOKED]
    desk.assert_replays_offline(trace_id, APP)
