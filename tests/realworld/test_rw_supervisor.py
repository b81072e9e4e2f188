"""The langgraph-supervisor README's multi-agent graph (``rw_supervisor_agent.py``): a supervisor hands the
request to a flight booking assistant (a ``transfer_to_…`` handoff tool returning a LangGraph ``Command``), which
books the flight (a ``write`` tool with a real effect), then hands back. Recorded with one line and replayed
through the CLI in every mode against the fake server (fresh ids per answer).

The supervisor builds its handoff tools from a Python ``set``: the order of the ``tools`` of its requests
depends on the process's hash seed. The run is recorded under one seed and replayed deterministically under
another that orders the tools the other way, so a replay that depended on their order would fail here.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import langgraph_supervisor  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
from conftest import RealWorld

SCRIPT = "rw_supervisor_agent.py"
APP = "rw_supervisor_agent:supervisor.invoke"
HANDOFFS = ("transfer_to_flight_assistant", "transfer_to_hotel_assistant")
STEPS = [  # each agent (the supervisor's own included) is an agent step holding its model and tool steps
    ("agent", "supervisor"),
    ("model", "ChatOpenAI"),  # the supervisor hands off
    ("handoff", "transfer_to_flight_assistant"),
    ("agent", "flight_assistant"),
    ("model", "ChatOpenAI"),  # the flight assistant books
    ("tool", "book_flight"),
    ("model", "ChatOpenAI"),  # and answers; the graph hands back
    ("agent", "supervisor"),
    ("model", "ChatOpenAI"),  # the supervisor answers
]
BOOKED = "Successfully booked a flight from BOS to JFK."


def _set_order(seed: str) -> tuple[str, ...]:
    """The order a Python set gives the handoff tools' agents under hash seed ``seed``."""
    code = "print(','.join({'flight_assistant', 'hotel_assistant'}))"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True
    )
    return tuple(out.stdout.strip().split(","))


@pytest.fixture
def supervised(world: RealWorld) -> RealWorld:
    """The world's server as the README's run needs it: the supervisor hands off to the flight assistant
    (whatever the order of its tools), each agent calls its own tool once."""
    world.server.prefer_tools = ("transfer_to_flight_assistant",)
    world.server.per_agent_tools = True
    world.server.tool_args_for.update(
        {name: {} for name in HANDOFFS} | {"book_flight": {"from_airport": "BOS", "to_airport": "JFK"}}
    )
    return world


def _tool_names(world: RealWorld, trace_id: str, step: int) -> list[str]:
    request = world.cli_json("show", trace_id)["steps"][step]["snapshots"]["model"]["request"]
    return [t["function"]["name"] for t in request["params"]["tools"]]  # LangChain: the bound tools' schemas


def test_a_supervisor_run_replays_in_every_mode_whatever_the_order_of_its_handoff_tools(
    supervised: RealWorld,
) -> None:
    world = supervised
    out = world.run_agent(SCRIPT)
    assert out.returncode == 0, out.stderr
    assert "Successfully transferred to flight_assistant" in out.stdout  # the fake supervisor's last word
    assert world.effects() == [BOOKED]
    (run,) = world.cli_json("runs")  # one invocation of the graph, one run
    trace_id, requests = run["trace_id"], world.server.count
    shown = world.cli_json("show", trace_id)
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == STEPS
    # an agent that hands off (LangGraph's ParentCommand, its control flow) ended as it meant to: not failed
    assert {s["status"] for s in shown["steps"]} == {"ok"}, [(s["name"], s["status"]) for s in shown["steps"]]
    risks = {
        s["name"]: s["attributes"].get("otel_replay.tool.risk")
        for s in shown["steps"]
        if s["kind"] in ("tool", "handoff")
    }
    assert risks == {"transfer_to_flight_assistant": None, "book_flight": "write"}  # a handoff has no risk
    recorded_order = _tool_names(world, trace_id, 1)
    assert sorted(recorded_order) == sorted(HANDOFFS)
    # a hash seed under which the set of agents iterates the other way round than in the recording's process
    other = next(
        seed
        for seed in map(str, range(1, 64))
        if [f"transfer_to_{name}" for name in _set_order(seed)] == recorded_order[::-1]
    )

    dry = world.cli_json("replay", trace_id, "--mode", "dry", "--app", APP)
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["book_flight"]
    assert dry["readiness"]["modes"]["deterministic"]["ready"], dry["readiness"]

    def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
        return world.cli_json("replay", trace_id, "--mode", mode, "--app", APP, *args, ok=ok, extra_env=env)

    # the recorded Command is rebuilt with the replay's message ids: LangGraph replaces, not appends
    mock = replay("mock")
    deterministic = replay("deterministic", PYTHONHASHSEED=other)
    for result in (mock, deterministic):
        assert result["outcome"] == "matched", result["divergences"]
    assert (world.server.count, world.effects()) == (requests, [BOOKED])  # offline: no request, no booking
    assert _tool_names(world, deterministic["replay_trace_id"], 1) == recorded_order[::-1]  # really reordered

    refused = replay("live", "--reason", "verify", ok=(2,))
    assert "book_flight" in refused["refusal"] and "transfer_to" not in refused["refusal"], refused["refusal"]
    live = replay("live", "--reason", "verify", "--approve", "book_flight")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.effects() == [BOOKED, BOOKED]  # the approved booking ran once

    changed = replay("deterministic", ok=(1,), RW_SUPERVISOR_PROMPT="You manage two assistants. Be brief.")
    first = changed["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 1)
    assert '+      "content": "You manage two assistants. Be brief.",' in first["diff"], first["diff"]


def test_zero_code_recording_has_the_same_steps_and_replays_offline(supervised: RealWorld) -> None:
    """Under ``opentelemetry-instrument`` with no otel-replay line: the same run, the handoff without a risk, the
    booking tool ``high`` by the name rule (no ``tool_risks`` given: "book" is a word of the rule), and an offline
    replay matches."""
    trace_id, shown = supervised.record_zero_code(SCRIPT)
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == STEPS
    risks = {
        s["name"]: s["attributes"].get("otel_replay.tool.risk")
        for s in shown["steps"]
        if s["kind"] in ("tool", "handoff")
    }
    assert risks == {"transfer_to_flight_assistant": None, "book_flight": "high"}
    assert supervised.effects() == [BOOKED]
    supervised.assert_replays_offline(trace_id, APP)
