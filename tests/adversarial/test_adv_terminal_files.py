"""Stored data cannot drive the terminal, and the home folder is private to its user.

Every run here carries escape sequences (window title, clipboard OSC 52, OSC 8 hyperlink, screen clear, a C1
CSI, BEL, carriage return) and Rich markup in the places the CLI prints: agent and tool names, values, error
messages, the replay's actor and reason, and a span another program wrote with the OTel SDK. Output is read as
bytes: the CLI runs in a pipe, so Rich adds no styling of its own and any control byte would come from data.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import adv_terminal_agents as agents
import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_replay as orp
from otel_replay.exporting.spool import SpoolExporter

HERE = Path(__file__).parent
CONTROL_CHARACTERS = ("\x1b", "\x07", "\r", "\x9b", "\x00")


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("OTEL_REPLAY_STORE", None)
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up; its text as UTF-8 bytes
        out = run_cli(args, env=env)
        return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.encode(), out.stderr.encode())
    return fork_server.run([sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, env=env, timeout=180)


def assert_inert(out: subprocess.CompletedProcess[bytes]) -> str:
    """No control character in stdout or stderr (both valid UTF-8), no traceback of the CLI; returns stdout."""
    streams = [out.stdout.decode("utf-8"), out.stderr.decode("utf-8")]
    for stream in streams:
        for character in CONTROL_CHARACTERS:
            assert character not in stream, (character, stream[:2000])
    assert "Traceback" not in streams[1], streams[1]
    return streams[0]


def record_runs(home: Path) -> dict[str, str]:
    agents.hostile_agent("where" + agents.CLIPBOARD)
    with pytest.raises(RuntimeError):
        agents.failing_agent("why")
    # A stranger's span: another program's provider writing into the same spool, claiming to be a run.
    provider = TracerProvider(resource=Resource.create({"service.name": "stranger" + agents.TITLE}))
    provider.add_span_processor(SimpleSpanProcessor(SpoolExporter(home / "spool")))
    with provider.get_tracer("stranger").start_as_current_span("invoke_agent " + agents.MARKUP) as span:
        span.set_attributes(
            {
                "otel_replay.run.id": "run" + agents.CLEAR,
                "gen_ai.agent.name": agents.HOSTILE,
                "otel_replay.schema.version": "1.1",
                "otel_replay.run.kind": "original",
                "otel_replay.run.entrypoint": agents.CLEAR + "evil:main",
            }
        )
    provider.shutdown()
    orp.flush()
    with orp.Store.open() as store:
        runs = {r.agent: r.trace_id for r in store.runs(limit=10)}
    return {
        "ok": runs["hostile" + agents.CLEAR + agents.MARKUP],
        "failed": runs["hostile-failing" + agents.LINK],
        "stranger": runs[agents.HOSTILE],
    }


def test_no_command_lets_stored_data_drive_the_terminal(home: Path, tmp_path: Path) -> None:
    traces = record_runs(home)
    listing = assert_inert(cli(home, "runs"))
    assert "[/oops]" in listing  # markup in a stored name prints as text and breaks nothing
    assert assert_inert(cli(home, "runs", "--json"))
    for trace_id in traces.values():
        shown = assert_inert(cli(home, "show", trace_id))
        assert trace_id in shown
        json.loads(assert_inert(cli(home, "show", trace_id, "--json")))
    # JSON output escapes what it must and loses nothing: the stored name reads back exactly.
    assert (
        json.loads(assert_inert(cli(home, "show", traces["ok"], "--json")))["agent"]
        == "hostile" + agents.CLEAR + agents.MARKUP
    )
    replayed = cli(
        home,
        "replay",
        traces["ok"],
        "--mode",
        "mock",
        "--actor",
        "eve" + agents.TITLE,
        "--reason",
        "look" + agents.LINK + agents.MARKUP,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert_inert(replayed)
    assert_inert(cli(home, "replay", traces["failed"], "--mode", "mock", "--json"))
    audit = assert_inert(cli(home, "audit"))
    assert "eve" in audit and "[/oops]" in audit
    assert_inert(cli(home, "audit", "--json"))
    assert_inert(cli(home, "diff", traces["ok"], traces["failed"]))
    # An error line built from stored data: the stranger's run names a hostile entrypoint.
    refused = cli(home, "replay", traces["stranger"], "--mode", "mock")
    assert refused.returncode == 2
    assert_inert(refused)
    case_file = tmp_path / "hostile.case.json"
    assert_inert(cli(home, "case", "export", traces["failed"], "-o", str(case_file)))
    assert_inert(cli(home, "case", "export", traces["failed"], "-o", "-"))
    assert_inert(cli(home, "case", "run", str(case_file)))


def test_a_home_that_existed_open_to_others_is_made_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "shared-home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    monkeypatch.setenv("OTEL_REPLAY_HOME", str(home))
    monkeypatch.delenv("OTEL_REPLAY_STORE", raising=False)
    orp.configure(home=home, exporter="spool")
    agents.hostile_agent("q")
    orp.flush()
    with orp.Store.open() as store:
        assert store.runs(limit=1)
    for folder in (home, home / "spool", home / "store"):
        assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0, (folder, oct(folder.stat().st_mode))
    assert stat.S_IMODE((home / "redaction.key").stat().st_mode) == 0o600


def test_the_agent_exception_line_of_a_replay_is_scrubbed_and_inert(home: Path) -> None:
    """A replayed agent raises again with a live secret and terminal controls in its message: the CLI's
    ``agent raised`` line (and the ``agent_error`` JSON key) shows neither in clear."""
    with pytest.raises(RuntimeError):
        agents.leaky_failing_agent("why")
    orp.flush()
    with orp.Store.open() as store:
        (summary,) = [r for r in store.runs(limit=10) if r.agent == "leaky-failing"]
    text = cli(home, "replay", summary.trace_id, "--mode", "mock")
    shown = assert_inert(text) + text.stderr.decode("utf-8")
    assert "agent raised RuntimeError" in shown and "upstream refused key" in shown
    as_json = cli(home, "replay", summary.trace_id, "--mode", "mock", "--json")
    data = json.loads(assert_inert(as_json))
    assert data["agent_error"]["type"] == "RuntimeError"
    for out in (text, as_json):
        assert agents.LEAKED_KEY.encode() not in out.stdout + out.stderr
