"""The langgraph-swarm README's graph (``rw_swarm_agent.py``): the user asks Alice to speak to Bob, Alice hands
off (``transfer_to_bob``, a ``Command`` to the parent graph), Bob sends a postcard (a ``write`` tool with a real
effect) and answers. Recorded with one line and replayed through the CLI in every mode against the fake server
(fresh ids per answer). Its handoff tools are listed, not built from a set: the hash seed is varied in
``test_rw_supervisor.py``."""

from __future__ import annotations

from typing import Any

import langgraph_swarm  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
from conftest import RealWorld

SCRIPT = "rw_swarm_agent.py"
APP = "rw_swarm_agent:app.invoke"
STEPS = [  # each agent of the swarm is an agent step holding its own model and tool steps
    ("agent", "Alice"),
    ("model", "ChatOpenAI"),  # Alice hands off
    ("handoff", "transfer_to_bob"),
    ("agent", "Bob"),
    ("model", "ChatOpenAI"),  # Bob sends the postcard
    ("tool", "send_postcard"),
    ("model", "ChatOpenAI"),  # and answers
]
SENT = "Ahoy from Bob"


@pytest.fixture
def swarm(world: RealWorld) -> RealWorld:
    """The world's server as the run needs it: Alice hands off to Bob, Bob calls his postcard tool once."""
    world.server.prefer_tools = ("transfer_to_bob", "send_postcard")
    world.server.per_agent_tools = True
    world.server.tool_args_for.update({"transfer_to_bob": {}, "send_postcard": {"text": SENT}})
    return world


def test_a_swarm_handoff_replays_in_every_mode(swarm: RealWorld) -> None:
    world = swarm
    out = world.run_agent(SCRIPT)
    assert out.returncode == 0, out.stderr
    assert world.effects() == [SENT]
    (run,) = world.cli_json("runs")  # one turn, one run
    trace_id, requests = run["trace_id"], world.server.count
    shown = world.cli_json("show", trace_id)
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == STEPS
    risks = {
        s["name"]: s["attributes"].get("otel_replay.tool.risk")
        for s in shown["steps"]
        if s["kind"] in ("tool", "handoff")
    }
    assert risks == {"transfer_to_bob": None, "send_postcard": "write"}

    def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
        return world.cli_json("replay", trace_id, "--mode", mode, "--app", APP, *args, ok=ok, extra_env=env)

    assert replay("dry")["readiness"]["modes"]["live"]["needs_approval"] == ["send_postcard"]
    for mode in ("mock", "deterministic"):
        result = replay(mode)
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert (world.server.count, world.effects()) == (requests, [SENT])  # offline: no request, no postcard
    refused = replay("live", "--reason", "verify", ok=(2,))
    assert "send_postcard" in refused["refusal"] and "transfer_to" not in refused["refusal"], refused["refusal"]
    live = replay("live", "--reason", "verify", "--approve", "send_postcard")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.effects() == [SENT, SENT]
    changed = replay("deterministic", ok=(1,), RW_BOB_PROMPT="You are Bob, you speak like a poet.")
    first = changed["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 4), first  # Bob's first request
    assert '+      "content": "You are Bob, you speak like a poet.",' in first["diff"], first["diff"]


def test_zero_code_recording_has_the_same_steps_and_replays_offline(swarm: RealWorld) -> None:
    """Under ``opentelemetry-instrument`` with no otel-replay line: the same run, ``send_postcard`` ``high`` by the
    name rule, and an offline replay matches."""
    trace_id, shown = swarm.record_zero_code(SCRIPT)
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == STEPS
    risks = {
        s["name"]: s["attributes"].get("otel_replay.tool.risk")
        for s in shown["steps"]
        if s["kind"] in ("tool", "handoff")
    }
    assert risks == {"transfer_to_bob": None, "send_postcard": "high"}
    assert swarm.effects() == [SENT]
    swarm.assert_replays_offline(trace_id, APP)


def test_a_later_turn_replays_with_the_checkpointers_memory_through_replay_session(swarm: RealWorld) -> None:
    """Two turns of one conversation (one checkpointer thread): the second starts at Bob, whom the first handed
    to. Replayed on its own, the second turn meets an empty memory (another process) and diverges; replayed with
    ``replay-session``, the turns run in order in one process and both match, with no request and no postcard."""
    world = swarm
    out = world.run_agent(SCRIPT, "i'd like to speak to Bob", "and now?", extra_env={"RW_SESSION": "chat-7"})
    assert out.returncode == 0, out.stderr
    assert world.effects() == [SENT]
    runs = sorted(world.cli_json("runs"), key=lambda r: r["started_at"])
    assert len(runs) == 2
    second = world.cli_json("show", runs[1]["trace_id"])
    assert [(s["kind"], s["name"]) for s in second["steps"]] == [("agent", "Bob"), ("model", "ChatOpenAI")]
    requests = world.server.count
    alone = world.cli_json("replay", runs[1]["trace_id"], "--mode", "mock", "--app", APP, ok=(1,))
    assert alone["outcome"] == "diverged"  # Alice answers: the memory of the first turn is not there
    session = world.cli_json("replay-session", "chat-7", "--mode", "mock", "--app", APP)
    assert [t["outcome"] for t in session["turns"]] == ["matched", "matched"], session
    assert (world.server.count, world.effects()) == (requests, [SENT])
