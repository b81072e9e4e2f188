"""Fixtures for the real-world agents: copies of the LangGraph, LangChain, OpenAI cookbook and OpenAI Agents SDK
examples from their own docs, run as their users run them (a process of their own, recorded with
``orp.instrument()`` or ``opentelemetry-instrument``), against the fake OpenAI-compatible server, then replayed
through the CLI. Agent programs and CLI commands run through :func:`fork_server.run`: forked from an interpreter
that has imported the SDKs already, or a real subprocess when that could differ (``opentelemetry-instrument``).

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

import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process
from fake_llm_servers import FakeLLMServer

from otel_replay import configure

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
            assert launcher, "no opentelemetry-instrument next to this Python (opentelemetry-instrumentation, [test])"
            command = [launcher, *command]
        return fork_server.run(
            command, capture_output=True, text=True, env={**self.env, **(extra_env or {})}, cwd=HERE, timeout=180
        )

    def record_zero_code(self, script: str) -> tuple[str, dict[str, Any]]:
        """Run ``script`` under ``opentelemetry-instrument`` with no otel-replay line (``RW_ZERO_CODE=1``): the trace
        id of the one run it recorded, and that run's ``show --json``."""
        out = self.run_agent(script, zero_code=True, extra_env={"RW_ZERO_CODE": "1"})
        assert out.returncode == 0, out.stderr
        (run,) = self.cli_json("runs")
        return run["trace_id"], self.cli_json("show", run["trace_id"])

    def assert_replays_offline(self, trace_id: str, app: str) -> None:
        """A deterministic replay of ``trace_id`` (``--app app``) matches, with no request and no effect."""
        requests, effects = self.server.count, self.effects()
        result = self.cli_json("replay", trace_id, "--mode", "deterministic", "--app", app)
        assert result["outcome"] == "matched", result["divergences"]
        assert (self.server.count, self.effects()) == (requests, effects)

    def cli(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """``otel-replay <args>`` in this world (working directory: ``tests/realworld``)."""
        if runs_in_process(args):  # the same main(), without a second of interpreter start-up
            return run_cli(args, env={**self.env, **(extra_env or {})}, cwd=HERE)
        return fork_server.run(
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


def _environment(home: Path, outbox: Path, server: FakeLLMServer) -> dict[str, str]:
    """The environment the agents and the CLI run in: this home and outbox, the fake server, no other exporter."""
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
    return env


@pytest.fixture
def world(home: Path, tmp_path: Path) -> Iterator[RealWorld]:
    """A fake server with volatile ids, a fresh home and outbox, and the environment the agents run in."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    with FakeLLMServer(volatile_ids=True) as server:
        yield RealWorld(server=server, home=home, outbox=outbox, env=_environment(home, outbox, server))


@pytest.fixture(scope="module")
def module_server() -> Iterator[FakeLLMServer]:
    """One fake server (volatile ids) for the tests of a module that share recorded runs (:class:`Recordings`):
    a live replay then talks to the server its run was recorded against. Tests count requests relative to
    ``server.count`` after their recording, as they do with a server of their own."""
    with FakeLLMServer(volatile_ids=True) as server:
        yield server


@dataclass(frozen=True)
class Recording:
    """One agent invocation recorded into a home of its own, left as the agent process left it (sealed spool
    segments, the redaction key; no store yet), with the outbox it wrote and what the program printed."""

    home: Path
    outbox: Path
    out: subprocess.CompletedProcess[str]


class Recordings:
    """Agent invocations recorded once per module and handed to each test as a copy of their own.

    Several tests of a module start from the same invocation of the same agent (the same program, arguments and
    environment) and then replay it in different ways; each agent process costs seconds of interpreter and SDK
    start-up. The first test asking for an invocation runs it (:meth:`RealWorld.run_agent`, a real process, into
    a home that no store has opened); every test that asks for it gets the home and the outbox copied into its
    own ``world`` before anything reads them, so the store ingests the spool there as it would after the agent
    ran in that home, and what a test's replays write (replay runs, audit rows, outbox lines) stays its own."""

    def __init__(self, server: FakeLLMServer, folder: Path) -> None:
        self._server = server
        self._folder = folder
        self._made: dict[tuple[Any, ...], Recording] = {}

    def world(self, world: RealWorld, script: str, *args: str, zero_code: bool = False, **env: str) -> Recording:
        """Put the recording of ``script ARGS`` (run with ``world``'s environment updated with ``env``) into
        ``world``: copy its home and outbox there and configure this process for that home, as :func:`world`
        left it. Tests of one module ask for the same invocation with the same arguments; what differs between
        their worlds (temp paths) is not part of the invocation."""
        assert world.server is self._server, "a shared recording needs the world of the module's server"
        assert {p.name for p in world.home.iterdir()} <= {"redaction.key"}, "a shared recording needs a fresh home"
        assert not any(world.outbox.iterdir()), "a shared recording needs an empty outbox"
        key = (script, args, zero_code, tuple(sorted(env.items())))
        if key not in self._made:
            target = self._folder / f"recording-{len(self._made)}"
            home, outbox = target / "home", target / "outbox"
            outbox.mkdir(parents=True)
            first = RealWorld(
                server=self._server,
                home=home,
                outbox=outbox,
                env={**world.env, "OTEL_REPLAY_HOME": str(home), "RW_OUTBOX": str(outbox)},
            )
            out = first.run_agent(script, *args, zero_code=zero_code, extra_env=env)
            self._made[key] = Recording(home=home, outbox=outbox, out=out)
        recording = self._made[key]
        if recording.home.exists():  # its redaction key replaces the fresh one
            shutil.copytree(recording.home, world.home, dirs_exist_ok=True)
        shutil.copytree(recording.outbox, world.outbox, dirs_exist_ok=True)
        configure(home=world.home, exporter="spool")  # this process reads the copied key, as a fresh CLI would
        return recording


@pytest.fixture(scope="module")
def recordings(module_server: FakeLLMServer, tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    """The module's shared agent invocations (see :class:`Recordings`)."""
    return Recordings(module_server, tmp_path_factory.mktemp("recordings"))


@pytest.fixture
def shared_world(home: Path, tmp_path: Path, module_server: FakeLLMServer) -> RealWorld:
    """:func:`world` on the module's server, for tests that start from a shared recording (:class:`Recordings`)."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    return RealWorld(server=module_server, home=home, outbox=outbox, env=_environment(home, outbox, module_server))
