"""Redaction tokens inside strings in plain tool loops (``rw_secret_loop_agent.py``) on the real ``openai`` and
``anthropic`` SDKs (``messages.create`` and the ``messages.stream`` helper): a live replay never sends one to a
model. It refuses, naming the field, before any request reaches the fake server; a value the agent takes from
the current environment is sent as usual.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Recordings

AGENT = "rw_secret_loop_agent.py"
TOKEN = "ghp_" + "A1b2" * 9
"""A GitHub token: the redactor stores it as ``[REDACTED:github_token:…]`` inside the string that holds it."""
PROVIDERS = ["openai", "anthropic", "anthropic-stream"]
TOOL_RESULT_FIELD = {
    "openai": "messages[2].content",
    "anthropic": "messages[2].content[0].content",
    "anthropic-stream": "messages[2].content[0].content",
}


def _env(world: Any, provider: str, **extra: str) -> dict[str, str]:
    return {"RW_PROVIDER": provider, "RW_ANTHROPIC_URL": world.server.anthropic_url, **extra}


def _record(world: Any, provider: str, question: str, shared: Recordings | None = None, **extra: str) -> str:
    """Run the agent once (or, with ``shared``, copy in the module's one recording of the same invocation)."""
    world.server.tool_args_for["lookup_account"] = {"user": "ada"}
    if shared is None:
        before = {r["trace_id"] for r in world.cli_json("runs")}
        out = world.run_agent(AGENT, question, extra_env=_env(world, provider, **extra))
    else:  # into a fresh home: no run before it
        before, out = set(), shared.world(world, AGENT, question, **_env(world, provider, **extra)).out
    assert out.returncode == 0, out.stderr
    new = [r["trace_id"] for r in world.cli_json("runs") if r["trace_id"] not in before]
    assert len(new) == 1
    shown = world.cli("show", new[0], "--json")
    assert TOKEN not in shown.stdout and "[REDACTED:github_token:" in shown.stdout
    return new[0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_token_in_the_user_message_stops_a_live_replay_before_any_request(world: Any, provider: str) -> None:
    trace_id = _record(world, provider, f"Use my token {TOKEN} to look up the account of ada")
    requests = world.server.count
    out = world.cli("replay", trace_id, "--mode", "live", "--reason", "verify", extra_env=_env(world, provider))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: input args[0] was redacted"), out.stderr
    assert world.server.count == requests
    assert TOKEN not in out.stdout + out.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_token_from_a_recorded_tool_result_is_never_sent_to_a_model(
    shared_world: Any, recordings: Recordings, provider: str
) -> None:
    world = shared_world
    trace_id = _record(world, provider, "Look up the account of ada", recordings, RW_ACCOUNT_TOKEN=TOKEN)
    requests = world.server.count
    # Steps 0 (model) and 1 (the tool) are answered from the recording; the tool's recorded result holds the
    # token's marker, which the loop puts into the next model request.
    result = world.cli_json(
        "replay",
        trace_id,
        "--mode",
        "live",
        "--from-step",
        "2",
        "--reason",
        "verify",
        ok=(2,),
        extra_env=_env(world, provider),
    )
    assert result["outcome"] == "refused"
    assert TOOL_RESULT_FIELD[provider] in result["refusal"]
    assert result["first_divergence"]["kind"] == "redacted"
    assert world.server.count == requests
    text = world.cli(
        "replay", trace_id, "--mode", "live", "--from-step", "2", "--reason", "verify", extra_env=_env(world, provider)
    )
    assert text.returncode == 2
    refused = [line for line in text.stdout.splitlines() if line.startswith("refused:")]
    assert len(refused) == 1 and f"redaction marker at {TOOL_RESULT_FIELD[provider]}" in refused[0]
    assert world.server.count == requests


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_token_the_agent_takes_from_the_environment_is_sent(
    shared_world: Any, recordings: Recordings, provider: str
) -> None:
    world = shared_world
    trace_id = _record(world, provider, "Look up the account of ada", recordings, RW_ACCOUNT_TOKEN=TOKEN)
    requests = world.server.count
    result = world.cli_json(
        "replay",
        trace_id,
        "--mode",
        "live",
        "--reason",
        "verify",
        ok=(0, 1),
        extra_env=_env(world, provider, RW_ACCOUNT_TOKEN=TOKEN),
    )
    assert result["refusal"] is None
    assert world.server.count == requests + 2
    sent = world.server.requests[-1][1]
    assert TOKEN in str(sent) and "[REDACTED:" not in str(sent)
    assert result["outcome"] == "matched", result["divergences"]
