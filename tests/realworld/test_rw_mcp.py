"""MCP agents as the MCP docs write them, against a stdio MCP server (``rw_mcp_server.py``: a read-only tool, a
side-effecting one, a resource and a prompt), recorded with ``orp.instrument()`` and replayed through the CLI in
every mode against the fake OpenAI server: ``rw_mcp_agent.py`` on the plain ``openai`` client. ``file_ticket``
appends a line to the outbox; the server notes the ``traceparent`` of each tool call in ``$RW_TRACE_LOG``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
from conftest import RealWorld

SCRIPT = "rw_mcp_agent.py"
APP = "rw_mcp_agent:answer"
FILED = "A-17: arrived damaged"


@pytest.fixture
def desk(world: RealWorld, tmp_path: Path) -> RealWorld:
    world.server.prefer_tools = ("file_ticket",)
    world.server.tool_args_for["file_ticket"] = {"order_id": "A-17", "note": "arrived damaged"}
    world.env["RW_TRACE_LOG"] = str(tmp_path / "traceparents.txt")
    return world


def test_mcp_calls_are_steps_and_every_mode_replays_without_the_server(desk: RealWorld, tmp_path: Path) -> None:
    world = desk
    out = world.run_agent(SCRIPT)
    assert out.returncode == 0, out.stderr
    assert "ticket filed for A-17" in out.stdout
    assert world.effects() == [FILED]
    (run,) = world.cli_json("runs")
    assert (run["agent"], run["status"]) == ("mcp-desk", "ok")
    trace_id, requests = run["trace_id"], world.server.count
    shown = world.cli_json("show", trace_id)
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    assert steps == [
        ("retrieval", "mcp tools/list", None),
        ("retrieval", "mcp resources/read", None),
        ("retrieval", "mcp prompts/get", None),
        ("model", "openai.chat.completions", None),
        ("tool", "file_ticket", "write"),
        ("model", "openai.chat.completions", None),
    ], steps
    tool = shown["steps"][4]
    assert tool["attributes"]["mcp.method.name"] == "tools/call"
    server = tool["attributes"]["otel_replay.mcp.server"]
    assert server.startswith("stdio: python") and server.endswith(" rw_mcp_server.py"), server
    # the run's trace reached the server in params._meta
    (parent,) = (tmp_path / "traceparents.txt").read_text().split()
    assert parent.split("-")[1] == trace_id

    def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
        return world.cli_json("replay", trace_id, "--mode", mode, "--app", APP, *args, ok=ok, extra_env=env)

    dry = replay("dry")
    assert dry["readiness"]["modes"]["live"]["needs_approval"] == ["file_ticket"]
    (listed,) = dry["readiness"]["servers"]  # the server an offline replay does not start
    assert (listed["server"], listed["steps"]) == (server, [0, 1, 2, 4])
    for mode in ("mock", "deterministic"):
        result = replay(mode)
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert (world.server.count, world.effects()) == (requests, [FILED])  # offline: no request, no ticket
    assert len((tmp_path / "traceparents.txt").read_text().split()) == 1  # ... and no server started
    refused = world.cli("replay", trace_id, "--mode", "live", "--app", APP, "--reason", "verify", "--json")
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert "file_ticket" in json.loads(refused.stdout)["refusal"]
    live = replay("live", "--reason", "verify", "--approve", "file_ticket")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.effects() == [FILED, FILED]
    changed = replay("deterministic", ok=(1,), RW_INSTRUCTIONS="Be terse.")
    first = changed["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 3)
    assert "+Be terse." in first["diff"], first["diff"]


@pytest.mark.parametrize("zero_code", [False, True], ids=["one-line", "zero-code"])
def test_agents_sdk_mcp_server_stdio_replays_without_the_server(
    desk: RealWorld, tmp_path: Path, zero_code: bool
) -> None:
    """The Agents SDK's ``MCPServerStdio``, recorded with one line or under ``opentelemetry-instrument`` (the entry
    points of the Agents SDK, the openai client and the MCP client)."""
    world = desk
    out = world.run_agent(
        "rw_mcp_agents_sdk_agent.py", zero_code=zero_code, extra_env={"RW_ZERO_CODE": str(int(zero_code))}
    )
    assert out.returncode == 0, out.stderr
    assert world.effects() == [FILED]
    (run,) = world.cli_json("runs")
    trace_id, requests = run["trace_id"], world.server.count
    shown = world.cli_json("show", trace_id)
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.tool.risk")) for s in shown["steps"]]
    # the tool step is the MCP client's (the server's annotations), not a second one of the Agents SDK
    assert ("tool", "file_ticket", "write") in steps and [k for k, *_ in steps].count("tool") == 1, steps
    assert ("retrieval", "mcp tools/list", None) in steps, steps

    def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
        app = "rw_mcp_agents_sdk_agent:main"
        return world.cli_json("replay", trace_id, "--mode", mode, "--app", app, *args, ok=ok, extra_env=env)

    for mode in ("mock", "deterministic"):
        result = replay(mode)
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert (world.server.count, world.effects()) == (requests, [FILED])
    assert len((tmp_path / "traceparents.txt").read_text().split()) == 1  # no server started offline
    live = replay("live", "--reason", "verify", "--approve", "file_ticket")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.effects() == [FILED, FILED]


@pytest.mark.parametrize("zero_code", [False, True], ids=["one-line", "zero-code"])
def test_pydantic_ai_mcp_toolset_replays_without_the_server(desk: RealWorld, tmp_path: Path, zero_code: bool) -> None:
    """Pydantic AI's ``MCPToolset`` over stdio (the fastmcp client on the MCP SDK's session): the MCP calls are
    the MCP client's steps, not a second tool step of Pydantic AI's, and a replay lets the session take the
    recorded tool listing as it took the server's (the fastmcp client checks each result against the listed
    output schema: without the listing it would list the tools again, a call the recording does not have)."""
    world = desk
    out = world.run_agent(
        "rw_mcp_pydantic_ai_agent.py", zero_code=zero_code, extra_env={"RW_ZERO_CODE": str(int(zero_code))}
    )
    assert out.returncode == 0, out.stderr
    assert world.effects() == [FILED]
    (run,) = world.cli_json("runs")
    assert (run["agent"], run["status"]) == ("mcp-support-desk", "ok")
    trace_id, requests = run["trace_id"], world.server.count
    shown = world.cli_json("show", trace_id)
    steps = [(s["kind"], s["name"], s["attributes"].get("otel_replay.step.instrumentation")) for s in shown["steps"]]
    assert steps == [
        ("retrieval", "mcp tools/list", "mcp"),
        ("model", "openai.responses", "openai"),
        ("tool", "file_ticket", "mcp"),
        ("model", "openai.responses", "openai"),
    ], steps
    app = "rw_mcp_pydantic_ai_agent:agent.run_sync"

    def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
        return world.cli_json("replay", trace_id, "--mode", mode, "--app", app, *args, ok=ok, extra_env=env)

    (listed,) = replay("dry")["readiness"]["servers"]
    assert listed["steps"] == [0, 2]
    for mode in ("mock", "deterministic"):
        result = replay(mode)
        assert result["outcome"] == "matched", (mode, result["divergences"])
    assert (world.server.count, world.effects()) == (requests, [FILED])
    assert len((tmp_path / "traceparents.txt").read_text().split()) == 1  # no server started offline
    assert "file_ticket" in replay("live", "--reason", "verify", ok=(2,))["refusal"]
    live = replay("live", "--reason", "verify", "--approve", "file_ticket")
    assert live["outcome"] == "matched", live["divergences"]
    assert world.effects() == [FILED, FILED]
    changed = replay("deterministic", ok=(1,), RW_INSTRUCTIONS="Be terse.")
    first = changed["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 1)
    assert "Be terse." in first["diff"], first["diff"]


def test_zero_code_the_plain_client_agent_is_one_run_of_its_session(desk: RealWorld, tmp_path: Path) -> None:
    """Under ``opentelemetry-instrument`` with no otel-replay line, the plain-client agent has no run boundary of
    its own: its MCP session is the run (from its first recorded call to its close), holding the listings, the
    model calls and the tool call, and it replays offline with ``--app``; its output is not compared (the session
    recorded none)."""
    world = desk
    out = world.run_agent(SCRIPT, zero_code=True, extra_env={"RW_ZERO_CODE": "1"})
    assert out.returncode == 0, out.stderr
    assert world.effects() == [FILED]
    (run,) = world.cli_json("runs")
    assert (run["agent"], run["status"], run["step_count"]) == ("mcp Support desk", "ok", 6), run
    trace_id, requests = run["trace_id"], world.server.count
    shown = world.cli_json("show", trace_id)
    assert shown["attributes"]["otel_replay.run.boundary"] == "mcp_session"
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == [
        ("retrieval", "mcp tools/list"),
        ("retrieval", "mcp resources/read"),
        ("retrieval", "mcp prompts/get"),
        ("model", "openai.chat.completions"),
        ("tool", "file_ticket"),
        ("model", "openai.chat.completions"),
    ]
    for mode in ("mock", "deterministic"):
        result = world.cli_json("replay", trace_id, "--mode", mode, "--app", APP, extra_env={"RW_ZERO_CODE": "1"})
        assert result["outcome"] == "matched", (mode, result["divergences"])
        assert any("an MCP session" in note for note in result["notes"]), result["notes"]
    assert (world.server.count, world.effects()) == (requests, [FILED])
    changed = world.cli_json(
        "replay",
        trace_id,
        "--mode",
        "deterministic",
        "--app",
        APP,
        ok=(1,),
        extra_env={"RW_ZERO_CODE": "1", "RW_INSTRUCTIONS": "Be terse."},
    )
    assert (changed["first_divergence"]["kind"], changed["first_divergence"]["step_index"]) == ("request", 3)
