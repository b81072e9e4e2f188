"""A secret the model repeated: the user pastes a mail API key into the question, and the model's answer calls
``send_email(api_key=..., body=...)`` with it, through the OpenAI Agents SDK (``@function_tool``) and through a
plain tool loop on the ``openai`` client (``@otel_replay.tool``), both against the project's fake OpenAI server.

The recording holds the key as the inline token ``[REDACTED:openai_api_key:<fingerprint>]`` in the question and
in the model's answer, and as the marker ``{"$redacted": <fingerprint>}`` in the tool's arguments (``api_key`` is
a secret key; ``body`` is wholly the secret). A mock or deterministic replay hands the recorded answer back, so
the tool receives the token's text; that text is the same redacted value, and the replayed arguments must
compare equal to the recorded ones. What a user sees is checked: the replay's outcome, exit code and diff
through the CLI, the requests the server received, and every byte under the home and of the commands' output
for the key in clear, percent-encoded or base64-encoded.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agents  # noqa: F401 - a package of the [test] extra: missing, the module fails
import fork_server
import openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
from cli_in_process import run_cli, runs_in_process
from test_adv_redaction import assert_nowhere, home_bytes

import otel_replay as orp
from otel_replay.redaction import Redactor
from otel_replay.replay import volatile
from otel_replay.replay.diff import normalize

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = Path(orp.__file__).resolve().parents[1]
AGENTS = "adv_secret_echo_agents"
APPS = {"agents": f"{AGENTS}:mail_agent", "loop": f"{AGENTS}:mail_loop"}
ALNUM = string.ascii_letters + string.digits


def _mail_key() -> str:
    """A mail provider's API key in the ``sk-`` shape the redactor knows (``openai_api_key``)."""
    return "sk-mail-" + "".join(secrets.choice(ALNUM) for _ in range(40))


@pytest.fixture
def world(home: Path) -> Iterator[dict[str, Any]]:
    from fake_llm_servers import FakeLLMServer

    key = _mail_key()
    with FakeLLMServer(tool_args={"to": "ops@example.com", "api_key": key, "body": key}) as server:
        yield {"home": home, "server": server, "key": key, "outputs": {}}


def _env(world: dict[str, Any], **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), str(HERE)]),
        "OPENAI_BASE_URL": world["server"].openai_url,
        "OPENAI_API_KEY": "test-key-not-secret",
        "OTEL_REPLAY_OPENAI_AGENTS_TRACING": "replace",  # nothing goes to OpenAI's trace backend
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    env.update(extra)
    return env


def _keep(world: dict[str, Any], what: str, out: subprocess.CompletedProcess[str]) -> None:
    """Keep what a command printed, for the leak check."""
    world["outputs"][f"{what} #{len(world['outputs'])}"] = (out.stdout + out.stderr).encode()


def cli(world: dict[str, Any], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = _env(world, **extra)
    if runs_in_process(args):
        out = run_cli(args, env=env, cwd=HERE)
    else:
        out = fork_server.run(
            [sys.executable, "-m", "otel_replay.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            cwd=HERE,
        )
    _keep(world, " ".join(args[:2]), out)
    return out


def record(world: dict[str, Any], shape: str) -> str:
    """Run the agent once as its user runs it; returns the trace id of the run it recorded."""
    question = f"Mail the weekly report to ops@example.com. My mail API key is {world['key']}"
    out = fork_server.run(
        [sys.executable, str(HERE / f"{AGENTS}.py"), shape, question],
        capture_output=True,
        text=True,
        env=_env(world),
        timeout=180,
        cwd=HERE,
    )
    _keep(world, f"agent {shape}", out)
    assert out.returncode == 0, out.stderr
    spooled = [path for path in world["home"].rglob("*") if path.is_file() and path.name != "redaction.key"]
    assert any("spool" in path.parts for path in spooled), spooled
    for path in spooled:  # the spool as the agent left it, before a command ingests it
        world["outputs"][f"after recording: {path.relative_to(world['home'])}"] = path.read_bytes()
    runs = cli(world, "runs", "--json")
    assert runs.returncode == 0, runs.stderr
    (trace_id,) = [r["trace_id"] for r in json.loads(runs.stdout) if r["kind"] == "original"]
    return str(trace_id)


def replay(world: dict[str, Any], trace_id: str, shape: str, mode: str, **extra: str) -> tuple[int, dict[str, Any]]:
    out = cli(world, "replay", trace_id, "--mode", mode, "--app", APPS[shape], "--json", **extra)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return out.returncode, json.loads(out.stdout)


def _tool_step(shown: dict[str, Any]) -> dict[str, Any]:
    (step,) = [s for s in shown["steps"] if s["kind"] == "tool"]
    assert step["name"] == "send_email"
    return dict(step)


@pytest.mark.parametrize("shape", ["agents", "loop"])
def test_a_secret_the_model_repeated_to_a_tool_matches_in_mock_and_deterministic_replays(
    world: dict[str, Any], shape: str
) -> None:
    trace_id = record(world, shape)
    shown = cli(world, "show", trace_id, "--json")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    # the question and the model's answer hold the key's token, the tool's arguments its marker: one fingerprint
    fingerprints = set(re.findall(r"\[REDACTED:openai_api_key:(hmac-sha256:[0-9a-f]{16})\]", text))
    assert len(fingerprints) == 1, fingerprints
    (fingerprint,) = fingerprints
    arguments = _tool_step(json.loads(text))["snapshots"]["tool"]["arguments"]
    assert arguments["api_key"] == {"$redacted": fingerprint, "scope": "tool.args.api_key"}
    assert arguments["body"] == {"$redacted": fingerprint, "scope": "tool.args.body"}

    requests = world["server"].count
    for mode in ("mock", "deterministic"):
        code, result = replay(world, trace_id, shape, mode)
        assert (code, result["outcome"]) == (0, "matched"), (result["agent_error"], result["divergences"])
        assert result["divergences"] == []
        changed = [name for name, section in result["diff"].items() if section["changed"]]
        assert changed in ([], ["latency"]), changed  # latency: the replay answers without a server
        replayed = cli(world, "show", result["replay_trace_id"], "--json")
        again = _tool_step(json.loads(replayed.stdout))["snapshots"]["tool"]["arguments"]
        assert again["api_key"] == arguments["api_key"]  # the marker of the same fingerprint, never the key
        assert fingerprint in json.dumps(again["body"]) and "[REDACTED:" in json.dumps(again["body"])
    assert world["server"].count == requests, "a mock or deterministic replay sent a request"

    assert_nowhere([world["key"]], {**home_bytes(world["home"]), **world["outputs"]})


def test_a_tool_argument_the_code_really_changes_still_diverges(world: dict[str, Any]) -> None:
    """The loop passes another secret (the key of its own environment) or the given key with text appended:
    a real change of the argument, reported at the tool in both modes."""
    trace_id = record(world, "loop")
    own_key = _mail_key()
    for variant in ("own-key", "suffixed"):
        for mode in ("mock", "deterministic"):
            code, result = replay(world, trace_id, "loop", mode, ADV_ECHO_VARIANT=variant, ADV_ECHO_MAIL_KEY=own_key)
            assert (code, result["outcome"]) == (1, "diverged"), (variant, mode, result["divergences"])
            first = result["first_divergence"]
            assert first["kind"] == "arguments" and "send_email" in first["reason"], first
            assert '"$redacted"' in first["diff"] and "api_key" in first["diff"], first["diff"]
    assert_nowhere([world["key"], own_key], {**home_bytes(world["home"]), **world["outputs"]})


def test_a_redaction_token_and_its_marker_are_one_value_and_nothing_else_is() -> None:
    """The rule the replays above rely on. A string that is wholly one redaction token (as a recorded answer holds
    it, or as a replayed value reads) is the value of its fingerprint: under a secret key the redactor records
    the marker of that fingerprint, elsewhere it keeps the string (a stream's delta stays text), and comparisons
    (replay matching, the diff) take it for the marker. Any other text, the token with anything added included,
    is another value. Nothing is ever turned back into the secret."""
    redactor = Redactor(key=secrets.token_bytes(32))
    key = _mail_key()
    recorded, _ = redactor.redact({"to": "ops@example.com", "api_key": key, "body": key}, "tool.args")
    fingerprint = recorded["api_key"]["$redacted"]
    assert recorded["body"] == {"$redacted": fingerprint, "scope": "tool.args.body"}
    answer, _ = redactor.redact({"arguments": json.dumps({"api_key": key, "body": key})}, "model.response")
    tokens = set(re.findall(r"\[REDACTED:[^\]]+\]", answer["arguments"]))
    assert len(tokens) == 1 and fingerprint in next(iter(tokens)), answer
    (token,) = tokens

    for passed_on in (token, f"[REDACTED:{fingerprint}]", f" {token}\n"):
        replayed, _ = redactor.redact({"to": "ops@example.com", "api_key": passed_on, "body": passed_on}, "tool.args")
        assert replayed["api_key"] == recorded["api_key"], passed_on
        assert replayed["body"] == passed_on
        assert volatile.same(recorded, replayed), passed_on
        assert normalize(recorded) == normalize(replayed), passed_on
    delta, _ = redactor.redact({"choices": [{"delta": {"content": token}}]}, "model.response")
    assert delta == {"choices": [{"delta": {"content": token}}]}

    for changed in (_mail_key(), f"{token}-2", f"Bearer {token}", "[REDACTED:error]", "[REDACTED:hmac-sha256:0123]"):
        replayed, _ = redactor.redact({"to": "ops@example.com", "api_key": changed, "body": changed}, "tool.args")
        assert replayed["api_key"]["$redacted"] != fingerprint, changed
        assert not volatile.same(recorded, replayed), changed
        assert normalize(recorded) != normalize(replayed), changed
    assert key not in json.dumps([recorded, answer])
