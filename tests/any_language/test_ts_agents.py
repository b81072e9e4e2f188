"""TypeScript agents on the official ``openai`` and ``@anthropic-ai/sdk`` npm packages (``openai_agent.mjs``,
``anthropic_agent.mjs``: a tool loop whose tool appends a line to the outbox; the OpenAI one streams), run on
the machine's Node.js with the packages ``package-lock.json`` pins (``make test`` installs them), recorded
through ``otel-replay proxy`` against the fake OpenAI + Anthropic server and replayed through ``otel-replay
serve`` with that server stopped. The agents change no code between the two: the SDKs read
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``.

Replayed: the same final output, no upstream request, ``matched``. With a changed system prompt: the agent gets
the 409 (and stops on it, as its SDK raises), ``serve`` exits 1 with the request divergence at step 0, and the
divergence's diff and ``otel-replay diff`` show the prompt change; with ``--then-live`` the agent finishes its
run, exactly the calls from the divergence on reaching a second fake upstream.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_servers import FakeLLMServer
from wire_commands import start as _start
from wire_commands import start_proxy

from otel_replay.storage.store import Store

HERE = Path(__file__).resolve().parent
WAIT = 90
FILED = "A-17: arrived damaged"


def _node() -> str:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        if os.environ.get("OTEL_REPLAY_REQUIRE_NODE") == "1":
            pytest.fail("Node.js (node and npm) is required here (OTEL_REPLAY_REQUIRE_NODE=1) and not on this machine")
        pytest.skip("Node.js (node and npm) is not on this machine")
    if not (HERE / "node_modules" / "openai").is_dir():  # make test installs them; a direct pytest run too
        out = subprocess.run(
            ["sh", str(HERE.parent.parent / "scripts" / "ensure-node-packages")],
            cwd=HERE.parent.parent,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert (HERE / "node_modules" / "openai").is_dir(), out.stdout + out.stderr
    return node


@pytest.mark.parametrize(
    ("script", "step", "run"),
    [
        ("openai_agent.mjs", "openai.chat.completions", "ts-support-desk"),
        ("anthropic_agent.mjs", "anthropic.messages", "ts-claude-desk"),
    ],
)
def test_a_typescript_agent_is_recorded_by_the_proxy_and_replayed_by_serve(
    home: Path, tmp_path: Path, script: str, step: str, run: str
) -> None:
    node = _node()
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    env = {**os.environ, "RW_OUTBOX": str(outbox), "OPENAI_API_KEY": "sk-ts-test", "ANTHROPIC_API_KEY": "sk-ts-test"}

    def agent(url: str, **extra: str) -> subprocess.CompletedProcess[str]:
        urls = {"OPENAI_BASE_URL": url + "/v1", "ANTHROPIC_BASE_URL": url}
        return subprocess.run(
            [node, script], cwd=HERE, env={**env, **urls, **extra}, capture_output=True, text=True, timeout=WAIT
        )

    def tickets() -> list[str]:
        return (outbox / "tickets.txt").read_text().splitlines()

    with FakeLLMServer(
        prefer_tools=("file_ticket",), tool_args_for={"file_ticket": {"order_id": "A-17", "note": "arrived damaged"}}
    ) as upstream:
        proxy, url = start_proxy(upstream, tmp_path / "proxy")
        recorded = agent(url)
        assert recorded.returncode == 0, recorded.stderr
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(timeout=WAIT) == 0
        requests = upstream.count
    assert recorded.stdout.strip() == "The weather: ticket filed for A-17"
    assert tickets() == [FILED]
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
        original = store.load_run(summary.trace_id)
    assert original.agent == run
    assert [(s.kind, s.name) for s in original.steps] == [("model", step), ("tool", "file_ticket"), ("model", step)]

    # the upstream is stopped: anything that reached it would fail
    server, url = _start("serve", original.trace_id, "--json", ready=tmp_path / "serve")
    replayed = agent(url)
    out, err = server.communicate(timeout=WAIT)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert server.returncode == 0, err
    result = json.loads(out)
    assert (result["outcome"], result["original_trace_id"]) == ("matched", original.trace_id), result["divergences"]
    assert requests == 2 and tickets() == [FILED, FILED]  # the agent's own tool ran again, in the agent

    server, url = _start("serve", original.trace_id, "--json", ready=tmp_path / "serve-changed")
    changed = agent(url, AGENT_SYSTEM="You are a terse support agent.")
    out, err = server.communicate(timeout=WAIT)
    assert changed.returncode != 0 and "409" in changed.stderr + changed.stdout, changed.stderr
    assert server.returncode == 1, err
    diverged = json.loads(out)
    first = diverged["first_divergence"]
    assert (first["kind"], first["step_index"]) == ("request", 0), first
    assert "+" in first["diff"] and "terse support agent" in first["diff"], first["diff"]
    # otel-replay diff shows the prompt change between the recording and the replay that diverged
    shown = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "diff", original.trace_id, diverged["replay_trace_id"], "--json"],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    requests = json.loads(shown.stdout)["sections"]["requests"]
    assert shown.returncode == 1 and requests["changed"], shown.stderr
    (change,) = requests["details"]["changed"]
    assert change["a_index"] == 0 and "terse support agent" in change["diff"], change

    # --then-live: the call that diverged and every later one go to the real API, the agent finishes its run
    with FakeLLMServer(
        prefer_tools=("file_ticket",), tool_args_for={"file_ticket": {"order_id": "A-17", "note": "arrived damaged"}}
    ) as live:
        upstream = "--openai-upstream" if step.startswith("openai") else "--anthropic-upstream"
        address = live.openai_url if step.startswith("openai") else live.anthropic_url
        server, url = _start(
            "serve",
            original.trace_id,
            "--json",
            "--then-live",
            upstream,
            address,
            "--reason",
            "try the terse prompt for real",
            ready=tmp_path / "serve-live",
        )
        finished = agent(url, AGENT_SYSTEM="You are a terse support agent.")
        assert finished.returncode == 0 and finished.stdout == recorded.stdout, finished.stderr
        assert live.count == 2  # both calls, from the one that diverged on
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=WAIT)
    result = json.loads(out)
    assert (server.returncode, result["outcome"], result["first_divergence"]["step_index"]) == (1, "diverged", 0), err
    assert tickets() == [FILED] * 3
