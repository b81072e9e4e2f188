"""What the LangGraph and LangChain ``AgentExecutor`` real-world tests check, shared by both test files.

Each check drives the agent program and the ``otel-replay`` CLI as a user would (subprocesses, the fake
server, a fresh home) and asserts what the user can see: runs and steps, exit codes, ``--json`` outcomes and
diffs, requests that reached the server and lines the side-effecting tool wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conftest import RealWorld

STEPS = [("model", "ChatOpenAI"), ("tool", "send_postcard"), ("model", "ChatOpenAI")]
"""Every model call and every tool call of one invocation, in order: the model asks for the first tool offered
(``send_postcard``), then answers with its result."""
EFFECT = "postcard from Paris"


@dataclass(frozen=True)
class Shape:
    """One agent program: its script, the ``--app`` a replay runs, and the agent (root span) name."""

    script: str
    app: str
    agent: str
    tool_app: str


@dataclass(frozen=True)
class Recorded:
    """One recorded invocation."""

    trace_id: str
    zero_code: bool
    requests: int
    effects: int


def zero_code_env(zero_code: bool) -> dict[str, str]:
    """``RW_ZERO_CODE=1`` leaves the agent's one ``orp.instrument()`` line out (recording and replaying)."""
    return {"RW_ZERO_CODE": "1"} if zero_code else {}


def record(world: RealWorld, shape: Shape, *, zero_code: bool) -> Recorded:
    """Run the agent once and check it made exactly one run with every model and tool call as a step."""
    before = {r["trace_id"] for r in world.cli_json("runs")}
    out = world.run_agent(shape.script, zero_code=zero_code, extra_env=zero_code_env(zero_code))
    assert out.returncode == 0, out.stderr
    assert "postcard sent from Paris" in out.stdout
    assert world.server.count == 2  # the model twice
    assert world.effects() == [EFFECT]
    new = [r for r in world.cli_json("runs") if r["trace_id"] not in before]
    assert len(new) == 1, new  # one invocation, one run
    (run,) = new
    assert (run["agent"], run["kind"], run["status"], run["step_count"]) == (shape.agent, "original", "ok", 3)
    shown = world.cli_json("show", run["trace_id"])
    assert [(s["kind"], s["name"]) for s in shown["steps"]] == STEPS
    assert [s["index"] for s in shown["steps"]] == [0, 1, 2]
    return Recorded(
        trace_id=run["trace_id"], zero_code=zero_code, requests=world.server.count, effects=len(world.effects())
    )


def replay(
    world: RealWorld,
    shape: Shape,
    recorded: Recorded,
    mode: str,
    *args: str,
    ok: tuple[int, ...] = (0,),
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``otel-replay replay TRACE --mode MODE --app APP ... --json`` (no entrypoint was recorded: --app)."""
    env = {**zero_code_env(recorded.zero_code), **(extra_env or {})}
    return world.cli_json("replay", recorded.trace_id, "--mode", mode, "--app", shape.app, *args, ok=ok, extra_env=env)


def assert_matched_offline(world: RealWorld, shape: Shape, recorded: Recorded) -> None:
    """Mock and deterministic replays: matched, an unchanged diff, no request, no side effect."""
    for mode in ("mock", "deterministic"):
        result = replay(world, shape, recorded, mode)
        assert result["outcome"] == "matched", (mode, result["divergences"], result["diff"])
        assert result["divergences"] == []
        # (latency is the machine's, not the agent's: a recording made on a busy machine is slower than its replay)
        changed = [name for name, section in result["diff"].items() if section["changed"]]
        assert changed in ([], ["latency"]), result["diff"]
    assert world.server.count == recorded.requests
    assert len(world.effects()) == recorded.effects


def assert_prompt_change_diverges(world: RealWorld, shape: Shape, recorded: Recorded) -> None:
    """A changed system prompt: deterministic stops at the first model step, showing the prompt's diff."""
    env = {"RW_SYSTEM_PROMPT": "You are a terse travel assistant."}
    result = replay(world, shape, recorded, "deterministic", ok=(1,), extra_env=env)
    assert result["outcome"] == "diverged"
    first = result["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 0), first
    assert '-      "content": "You are a helpful travel assistant.",' in first["diff"]
    assert '+      "content": "You are a terse travel assistant.",' in first["diff"]
    text = world.cli(
        "replay",
        recorded.trace_id,
        "--mode",
        "deterministic",
        "--app",
        shape.app,
        extra_env={**zero_code_env(recorded.zero_code), **env},
    )
    assert text.returncode == 1
    assert "first divergence at step 0" in text.stdout and "You are a terse travel assistant." in text.stdout
    assert world.server.count == recorded.requests
    assert len(world.effects()) == recorded.effects


def assert_tool_result_change_diverges(world: RealWorld, shape: Shape, recorded: Recorded) -> None:
    """What the model is shown of the tool's result changed: deterministic stops at the next model step (2)."""
    result = replay(world, shape, recorded, "deterministic", ok=(1,), extra_env={"RW_TOOL_NOTE": "checked twice"})
    first = result["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 2), first
    assert '-      "content": "postcard sent from Paris",' in first["diff"]
    assert '+      "content": "postcard sent from Paris (checked twice)",' in first["diff"]
    assert world.server.count == recorded.requests
    assert len(world.effects()) == recorded.effects


def assert_live_replay(world: RealWorld, shape: Shape, recorded: Recorded) -> None:
    """Live: refused before the side-effecting tool without an approval; with it, the real calls run and the
    replay matches (fresh ids from the server are not a change)."""
    refused = replay(world, shape, recorded, "live", "--reason", "verify the fix", ok=(2,))
    assert refused["outcome"] == "refused" and "--approve send_postcard" in refused["refusal"]
    assert len(world.effects()) == recorded.effects
    requests = world.server.count
    result = replay(
        world, shape, recorded, "live", "--reason", "verify the fix", "--approve", "send_postcard", ok=(0, 1)
    )
    assert world.server.count == requests + 2
    assert world.effects() == [EFFECT] * (recorded.effects + 1)
    assert result["executions"] == {"send_postcard": 1}
    assert result["outcome"] == "matched", (result["divergences"], result["diff"])


def assert_replay_tool(world: RealWorld, shape: Shape, recorded: Recorded) -> None:
    """``replay-tool`` on the LangChain tool: mock answers from the recording; live runs it only approved."""
    env = zero_code_env(recorded.zero_code)
    mock = world.cli_json("replay-tool", recorded.trace_id, "--step", "1", "--app", shape.tool_app, extra_env=env)
    assert (mock["tool"], mock["outcome"]) == ("send_postcard", "matched")
    assert mock["sandbox"].startswith(("landlock ABI", "audit hooks only")), mock["sandbox"]  # an offline replay
    assert len(world.effects()) == recorded.effects
    refused = world.cli_json(
        "replay-tool",
        recorded.trace_id,
        "--step",
        "1",
        "--app",
        shape.tool_app,
        "--mode",
        "live",
        "--reason",
        "check the tool",
        ok=(2,),
        extra_env=env,
    )
    assert refused["outcome"] == "refused"
    assert len(world.effects()) == recorded.effects
    live = world.cli_json(
        "replay-tool",
        recorded.trace_id,
        "--step",
        "1",
        "--app",
        shape.tool_app,
        "--mode",
        "live",
        "--reason",
        "check the tool",
        "--approve",
        extra_env=env,
    )
    assert (live["outcome"], live["sandbox"]) == ("matched", "none"), live
    assert world.effects() == [EFFECT] * (recorded.effects + 1)
    assert world.server.count == recorded.requests
