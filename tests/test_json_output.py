"""`--json` output is one JSON document on stdout, whatever the replayed agent prints while it runs.

The agent prints through ``print``, ``sys.stdout`` and straight to file descriptor 1, and its tool prints too;
every command that runs agent code (``replay``, ``replay-tool``, ``replay-session``, ``case run``) must still
give a stdout that parses as JSON, with the agent's words on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import chatty_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process

import otel_replay as orp

TESTS_DIR = Path(__file__).resolve().parent
SAID = ("chatty agent starting", "written to sys.stdout", "written to file descriptor 1", "tool looking up")


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
    }
    env.pop("OTEL_REPLAY_STORE", None)
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=env, cwd=TESTS_DIR.parent)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=TESTS_DIR.parent,
    )


def test_json_commands_keep_what_the_agent_prints_off_stdout(
    home: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with orp.identity(session="chatty-1"):
        agents.chatty_agent("lamps")
    orp.flush()
    printed = capfd.readouterr().out
    assert all(words in printed for words in SAID), printed  # it really prints on stdout
    with orp.Store.open() as store:
        trace_id = store.runs(limit=1)[0].trace_id
        step = next(s.index for s in store.load_run(trace_id).steps if s.kind == "tool")
    case_file = tmp_path / "chatty.case.json"
    assert cli(home, "case", "export", trace_id, "-o", str(case_file)).returncode == 0
    commands = {
        "replay": (["replay", trace_id, "--mode", "mock", "--json"], SAID[:3]),
        "replay live": (["replay", trace_id, "--mode", "live", "--reason", "check", "--json"], SAID),
        "replay-tool": (
            ["replay-tool", trace_id, "--step", str(step), "--mode", "live", "--reason", "check", "--json"],
            SAID[3:],
        ),
        "replay-session": (["replay-session", "chatty-1", "--mode", "mock", "--json"], SAID[:3]),
        "case run": (["case", "run", str(case_file), "--json"], SAID[:3]),
    }
    for name, (args, said) in commands.items():
        out = cli(home, *args)
        assert out.returncode == 0, (name, out.stdout, out.stderr)
        document = json.loads(out.stdout)  # nothing but the document
        assert isinstance(document, dict), name
        for words in said:
            assert words in out.stderr, (name, words, out.stderr)
