"""An async streaming agent whose model asks for two tools at once, run as two concurrent runs in one process
(``rw_parallel_agent.py``), recorded and replayed through the CLI in every mode against the fake OpenAI server:
each run holds exactly its own steps, and each replays on its own."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import RealWorld

SCRIPT = "rw_parallel_agent.py"
APP = "rw_parallel_agent:answer"
STEPS = [
    ("model", "openai.chat.completions"),
    ("tool", "check_stock"),
    ("tool", "reserve_item"),
    ("model", "openai.chat.completions"),
]


@pytest.fixture
def shop(world: RealWorld) -> RealWorld:
    world.server.parallel_tools = ("check_stock", "reserve_item")
    world.server.tool_args_for.update({"check_stock": {"item": "lamp"}, "reserve_item": {"item": "lamp"}})
    return world


def test_two_concurrent_runs_with_parallel_tool_calls_each_replay(shop: RealWorld) -> None:
    world = shop
    out = world.run_agent(SCRIPT)
    assert out.returncode == 0, out.stderr
    assert world.effects() == ["lamp", "lamp"]
    runs = world.cli_json("runs")
    assert sorted((r["agent"], r["status"], r["step_count"]) for r in runs) == [("parallel-desk", "ok", 4)] * 2
    questions = set()
    for run in runs:
        shown = world.cli_json("show", run["trace_id"])
        assert [(s["kind"], s["name"]) for s in shown["steps"]] == STEPS  # its own steps, none of the other run's
        questions.add(shown["snapshots"]["input"]["args"][0])
        tools = [s["snapshots"]["tool"] for s in shown["steps"] if s["kind"] == "tool"]
        assert [t["arguments"] for t in tools] == [{"item": "lamp"}] * 2
    assert questions == {"reserve a lamp", "reserve a chair"}
    requests = world.server.count

    def replay(trace_id: str, mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
        return world.cli_json("replay", trace_id, "--mode", mode, "--app", APP, *args, ok=ok, extra_env=env)

    for run in runs:
        for mode in ("mock", "deterministic"):
            result = replay(run["trace_id"], mode)
            assert result["outcome"] == "matched", (mode, result["divergences"])
    assert (world.server.count, world.effects()) == (requests, ["lamp", "lamp"])
    first = runs[0]["trace_id"]
    assert "reserve_item" in replay(first, "live", "--reason", "verify", ok=(2,))["refusal"]
    live = replay(first, "live", "--reason", "verify", "--approve", "reserve_item")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.effects() == ["lamp"] * 3
    changed = replay(first, "deterministic", ok=(1,), RW_INSTRUCTIONS="Be terse.")
    assert (changed["first_divergence"]["kind"], changed["first_divergence"]["step_index"]) == ("request", 0)
    assert "Be terse." in changed["first_divergence"]["diff"]
