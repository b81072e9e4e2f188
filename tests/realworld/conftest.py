"""Fixtures for the real-world agents: copies of the LangGraph, LangChain, OpenAI cookbook and OpenAI Agents SDK
examples from their own docs, run as their users run them (a subprocess, recorded with ``orp.instrument()`` or
``opentelemetry-instrument``), against the fake OpenAI-compatible server, then replayed through the CLI.

Each agent has one real side-effecting tool: it appends a line to a file in ``RW_OUTBOX``, so a test can count
the effects a run had on disk. The server hands out fresh ids with every answer (``volatile_ids``), as the real
API does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import run_cli, runs_in_process
from fake_llm_servers import FakeLLMServer

HERE = Path(__file__).resolve().parent
IN_PROCESS = ("runs", "show")


@dataclass
class RealWorld:
    """One test's world: the fake server, a fresh otel-replay home, the outbox and the environment of both."""

    server: FakeLLMServer
    home: Path
    outbox: Path
    env: dict[str, str]

    def effects(self) -> list[str]:
        """Lines written by the agents' side-effecting tools so far."""
        return [line for f in sorted(self.outbox.glob("*")) for line in f.read_text().splitlines()]

    def run_agent(
        self, script: str, *args: str, zero_code: bool = False, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``tests/realworld/<script>`` as a program; with ``zero_code`` under ``opentelemetry-instrument``."""
        command = [sys.executable, str(HERE / script), *args]
        if zero_code:
            launcher = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
            if launcher is None:
                pytest.skip("opentelemetry-instrument is not installed next to this Python")
            command = [launcher, *command]
        return subprocess.run(
            command, capture_output=True, text=True, env={**self.env, **(extra_env or {})}, cwd=HERE, timeout=180
        )

    def cli(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """``otel-replay <args>`` in this world (working directory: ``tests/realworld``)."""
        if runs_in_process(args):  # the same main(), without a second of interpreter start-up
            return run_cli(args, env={**self.env, **(extra_env or {})}, cwd=HERE)
        return subprocess.run(
            [sys.executable, "-m", "otel_replay.cli", *args],
            capture_output=True,
            text=True,
            env={**self.env, **(extra_env or {})},
            cwd=HERE,
            timeout=180,
        )

    def cli_json(self, *args: str, ok: tuple[int, ...] = (0,), **kwargs: Any) -> Any:
        """``otel-replay <args> --json``, parsed; fails the test on an exit code not in ``ok``. The read-only
        commands ``runs`` and ``show`` run in this process (the same CLI code, without a second of start-up);
        the others, which import and run the agent, in a subprocess like the user's shell."""
        if args[0] in IN_PROCESS and not kwargs:
            from typer.testing import CliRunner

            from otel_replay.cli import app

            result = CliRunner().invoke(app, [*args, "--json"], env={"OTEL_REPLAY_HOME": str(self.home)})
            assert result.exit_code in ok, f"exit {result.exit_code}\n{result.output}"
            return json.loads(result.stdout)
        out = self.cli(*args, "--json", **kwargs)
        assert out.returncode in ok, f"exit {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
        return json.loads(out.stdout)


@pytest.fixture
def world(home: Path, tmp_path: Path) -> Iterator[RealWorld]:
    """A fake server with volatile ids, a fresh home and outbox, and the environment the agents run in."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    with FakeLLMServer(volatile_ids=True) as server:
        env = {
            **os.environ,
            "OTEL_REPLAY_HOME": str(home),
            "RW_OUTBOX": str(outbox),
            "OPENAI_BASE_URL": server.openai_url,
            "OPENAI_API_KEY": "sk-test-" + "1" * 32,
            "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p),
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai_v2,openai",
        }
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_REPLAY_STORE"):
            env.pop(name, None)
        yield RealWorld(server=server, home=home, outbox=outbox, env=env)
