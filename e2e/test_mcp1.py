"""LangChain's ``langchain-mcp-adapters`` end to end, in an environment of its own with mcp 1.x.

Its latest release does not import with mcp 2 (which the main environment runs), so this test builds a second
virtual environment (``.venv-mcp1`` at the project's root, from ``e2e/mcp1/requirements.txt`` and this checkout;
built again when the requirements change) and runs the README's agent there (``e2e/mcp1/agent.py``: a
``MultiServerMCPClient`` over stdio, ``create_agent``) against the fake OpenAI server, with the installed
``otel-replay`` of that environment: the MCP calls are the MCP client's steps (risk from the server's
annotations, the trace context in ``params._meta``), not second tool steps of LangChain's; offline replays start
no server and send no request; live needs the approval; a changed system prompt diverges at its request.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, User
from fake_llm_servers import FakeLLMServer

HERE = ROOT / "e2e" / "mcp1"
VENV = ROOT / ".venv-mcp1"
FILED = "A-17: arrived damaged"


def _environment() -> Path:
    """The mcp 1.x environment's bin folder, built (or built again) when its requirements changed."""
    requirements = HERE / "requirements.txt"
    extras = f"{ROOT}[mcp,langchain]"  # wrapt and opentelemetry-instrumentation come with the extras
    given = requirements.read_bytes() + (ROOT / "pyproject.toml").read_bytes() + extras.encode()
    wanted = hashlib.sha256(given).hexdigest()
    stamp = VENV / ".installed"
    if not stamp.is_file() or stamp.read_text() != wanted:
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True, capture_output=True)
        out = subprocess.run([*pip, "-e", extras, "-r", str(requirements)], capture_output=True, text=True)
        assert out.returncode == 0, f"building {VENV} failed:\n{out.stdout}\n{out.stderr}"
        stamp.write_text(wanted)
    return VENV / "bin"


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return _environment()


def test_langchain_mcp_adapters_on_mcp_1(bin_dir: Path, user: User, tmp_path: Path) -> None:
    python, cli = str(bin_dir / "python"), str(bin_dir / "otel-replay")
    project = user.cwd / "desk"
    shutil.copytree(HERE, project, ignore=shutil.ignore_patterns("requirements.txt", "__pycache__"))
    outbox, trace_log = tmp_path / "outbox", tmp_path / "traceparents.txt"
    outbox.mkdir()
    server = FakeLLMServer(
        prefer_tools=("file_ticket",),
        tool_args_for={"file_ticket": {"order_id": "A-17", "note": "arrived damaged"}},
    )
    with server:
        env = {
            "OPENAI_BASE_URL": server.openai_url,
            "OPENAI_API_KEY": "sk-test-" + "1" * 32,
            "RW_OUTBOX": str(outbox),
            "RW_TRACE_LOG": str(trace_log),
        }
        user.env.update(env)
        out = user.run(python, "agent.py", cwd=project)
        assert "ticket filed for A-17" in out.stdout

        def effects() -> list[str]:
            return (outbox / "tickets.txt").read_text().splitlines()

        assert effects() == [FILED]
        (run,) = user.json(cli, "runs")
        assert (run["agent"], run["status"]) == ("mcp-adapters-desk", "ok")
        trace_id, requests = run["trace_id"], server.count
        shown = user.json(cli, "show", trace_id)
        steps = [
            (
                s["kind"],
                s["name"],
                s["attributes"].get("otel_replay.step.instrumentation"),
                s["attributes"].get("otel_replay.tool.risk"),
            )
            for s in shown["steps"]
        ]
        assert steps == [
            ("retrieval", "mcp tools/list", "mcp", None),
            ("model", "ChatOpenAI", "langchain", None),
            ("tool", "file_ticket", "mcp", "write"),  # the server's annotations: one step, the MCP client's
            ("model", "ChatOpenAI", "langchain", None),
        ], steps
        (parent,) = trace_log.read_text().split()  # mcp 1.x: otel-replay put the trace context in params._meta
        assert parent.split("-")[1] == trace_id

        def replay(mode: str, *args: str, ok: tuple[int, ...] = (0,), **extra: str) -> dict:
            return user.json(
                cli, "replay", trace_id, "--mode", mode, "--app", "agent:answer", *args, ok=ok, env=extra, cwd=project
            )

        (listed,) = replay("dry")["readiness"]["servers"]
        assert listed["steps"] == [0, 2]
        for mode in ("mock", "deterministic"):
            result = replay(mode)
            assert result["outcome"] == "matched", (mode, result["divergences"])
        assert (server.count, effects()) == (requests, [FILED])  # offline: no request, no ticket
        assert len(trace_log.read_text().split()) == 1  # ... and no server started
        assert "file_ticket" in replay("live", "--reason", "verify", ok=(2,))["refusal"]
        live = replay("live", "--reason", "verify", "--approve", "file_ticket")
        assert live["outcome"] == "matched", live["divergences"]
        assert effects() == [FILED, FILED]
        changed = replay("deterministic", ok=(1,), RW_INSTRUCTIONS="Be terse.")
        first = changed["first_divergence"]
        assert (first["kind"], first["step_index"]) == ("request", 1), first
