"""What the `otel-replay` command prints, as a newcomer reads it: the version, an empty home, the agent's own
exception during a replay, a refused live replay, a dry replay's readiness, `case export` paths, error lines
without library internals, and counts in words.

Runs are recorded with the real decorators into the ``home`` fixture's store; the commands run in process
through typer's CliRunner (``--version`` runs the installed entry point in one subprocess).
"""

from __future__ import annotations

import http.server
import inspect
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cli_output_agents as agents
import pytest
from typer.testing import CliRunner

import otel_replay as orp
from otel_replay.cli import app, main

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent
RUNNER = CliRunner()
DIFF_TITLE = re.compile(r"^diff [0-9a-f]{32} → ", re.MULTILINE)
INTERNALS = (
    "Traceback",
    "pydantic",
    "ValidationError",
    "DB::Exception",
    "Code: ",
    "HTTPDriver",
    "Received ClickHouse",
    "(version ",
    "errors.pydantic.dev",
    "Value error,",
    "Input should be",
    "Exception(",
    "Error(",
)


def run(*args: str) -> Any:
    """One `otel-replay` command in this process; stdout and stderr apart."""
    return RUNNER.invoke(app, list(args), env={"COLUMNS": "200"})  # tables as wide as a pipe's, whatever the shell


def record_billing(invoice: str = "INV-7") -> str:
    """Record one billing run into the configured home; its trace id."""
    agents.billing_agent(invoice)
    orp.flush()
    out = run("runs", "--json", "--agent", "billing-agent", "--kind", "original")
    assert out.exit_code == 0, out.stderr
    return str(json.loads(out.stdout)[0]["trace_id"])


@pytest.fixture
def in_tests_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replays import the recorded entrypoint (``cli_output_agents``): the project's code is the repository."""
    monkeypatch.chdir(ROOT)


# ------------------------------------------------------------------------------------------- version


LOADED_AT_EXIT = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("loaded: " + " ".join(sorted(sys.modules)) + "\\n"))
from otel_replay.cli import main
main()
"""
HEAVY = (
    "pydantic",
    "chdb",
    "clickhouse_connect",
    "opentelemetry",
    "otel_replay.storage",
    "otel_replay.redaction",
    "otel_replay.recording",
    "otel_replay.replay",
    "otel_replay.exporting",
    "rich",
)


def test_version_prints_the_installed_version_and_loads_nothing_heavy(home: Path) -> None:
    from importlib.metadata import version

    out = subprocess.run(
        [sys.executable, "-c", LOADED_AT_EXIT, "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS_DIR)])},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"otel-replay {version('otel-replay')}\n"
    (loaded_line,) = out.stderr.splitlines()  # nothing else on stderr
    loaded = loaded_line.removeprefix("loaded: ").split()
    assert "otel_replay.cli" in loaded
    assert not [m for m in loaded if m.startswith(HEAVY)], "the command line loaded the store, SDK, engine or Rich"
    assert not home.joinpath("store").exists()


# ------------------------------------------------------------------------------------- empty home


def test_runs_on_a_home_without_a_store_says_so_without_creating_one(home: Path) -> None:
    text = run("runs")
    assert text.exit_code == 0, text.stderr
    assert "No runs recorded yet" in text.stdout
    as_json = run("runs", "--json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == []
    # chDB was never started: the embedded store's folder and lock were not created.
    assert not home.joinpath("store").exists() and not home.joinpath("store.lock").exists()


def test_runs_ingests_a_spool_that_waits_in_a_home_without_a_store(home: Path) -> None:
    agents.billing_agent("INV-1")
    orp.flush()
    assert not home.joinpath("store").exists()
    out = run("runs")
    assert out.exit_code == 0, out.stderr
    assert "1 run, newest first" in out.stdout and "billing-agent" in out.stdout
    agents.billing_agent("INV-2")
    orp.flush()
    out = run("runs")
    assert "2 runs, newest first" in out.stdout and "run(s)" not in out.stdout


# ---------------------------------------------------------------------------------- agent exception


def test_the_agent_exception_is_shown_with_its_own_frame(home: Path, in_tests_dir: None) -> None:
    tid = record_billing()
    raise_line = next(
        number
        for number, line in enumerate(inspect.getsource(agents).splitlines(), start=1)
        if "raise LookupError" in line
    )
    out = run("replay", tid, "--mode", "mock", "--app", "cli_output_agents:billing_agent_broken", "--json")
    assert out.exit_code == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["agent_error"] == {
        "type": "LookupError",
        "message": "no currency on invoice INV-7",
        "file": os.path.join("tests", "cli_output_agents.py"),
        "line": raise_line,
        "function": "_total",
    }
    assert data["outcome"] == "diverged" and data["diff"]  # the keys that were there still are

    text = run("replay", tid, "--mode", "mock", "--app", "cli_output_agents:billing_agent_broken")
    assert text.exit_code == 1
    line = next(line for line in text.stdout.splitlines() if line.startswith("agent raised"))
    assert line == (
        f"agent raised LookupError: no currency on invoice INV-7  at "
        f"{os.path.join('tests', 'cli_output_agents.py')}:{raise_line} in _total"
    )
    assert "Traceback" not in text.stdout + text.stderr and "recording.py" not in text.stdout


def test_a_replay_whose_agent_returns_has_no_agent_error(home: Path, in_tests_dir: None) -> None:
    tid = record_billing()
    out = run("replay", tid, "--mode", "mock", "--json")
    assert out.exit_code == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["agent_error"] is None and data["refused_call"] is None and data["ready_modes"] is None
    text = run("replay", tid, "--mode", "mock")
    assert "agent raised" not in text.stdout and ": matched" in text.stdout


# ------------------------------------------------------------------------------------------ refusal


def test_a_refused_live_replay_names_the_call_and_the_flag_without_a_diff(home: Path, in_tests_dir: None) -> None:
    tid = record_billing()
    agents.PAYOUTS.clear()
    text = run("replay", tid, "--mode", "live", "--reason", "check the fix")
    assert text.exit_code == 2, text.stderr
    assert agents.PAYOUTS == []  # refused before the agent started
    lines = text.stdout.splitlines()
    assert any(line.startswith(f"live replay of {tid}: refused") for line in lines)
    refused = [line for line in lines if line.startswith("refused:")]
    assert len(refused) == 1 and "'pay_out'" in refused[0] and "risk write" in refused[0]
    assert (
        "to approve it, replay again with --approve pay_out (the replay was refused before the agent started; "
        "nothing ran)"
    ) in lines
    assert not DIFF_TITLE.search(text.stdout) and "first divergence" not in text.stdout

    out = run("replay", tid, "--mode", "live", "--reason", "check the fix", "--json")
    assert out.exit_code == 2
    data = json.loads(out.stdout)
    assert data["refused_call"] == {
        "kind": "tool",
        "name": "pay_out",
        "step_index": 2,
        "risk": "write",
        "approve_with": "--approve pay_out",
    }
    assert data["outcome"] == "refused" and "pay_out" in data["refusal"]

    # The flag it names is the one that works.
    approved = run("replay", tid, "--mode", "live", "--reason", "check the fix", "--approve", "pay_out")
    assert approved.exit_code == 0, approved.stdout + approved.stderr
    assert agents.PAYOUTS == ["INV-7"]


# ---------------------------------------------------------------------------------------------- dry


def test_a_dry_replay_reports_readiness_not_matched(home: Path) -> None:
    tid = record_billing()
    text = run("replay", tid, "--mode", "dry")
    assert text.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"dry replay of {tid}: recording intact, nothing ran")
    assert "matched" not in text.stdout
    assert "ready to replay: mock, deterministic, live" in lines
    assert "live replay executes 1 write/high tool only when approved: --approve pay_out" in lines

    out = run("replay", tid, "--mode", "dry", "--json")
    data = json.loads(out.stdout)
    assert data["ready_modes"] == ["mock", "deterministic", "live"]
    assert data["readiness"]["modes"]["live"]["needs_approval"] == ["pay_out"]
    assert data["outcome"] == "matched"  # unchanged meaning for scripts: the recording is intact


def test_a_dry_replay_of_a_run_without_entrypoint_says_what_is_missing(home: Path) -> None:
    from otel_replay import semconv

    tracer = orp.configure(home=home, exporter="spool").get_tracer("handmade-agent")

    with tracer.start_as_current_span(f"{semconv.SPAN_AGENT} handmade") as span:
        span.set_attributes(
            {
                semconv.RUN_ID: "3f1c1e8e-0000-4000-8000-000000000001",
                semconv.SCHEMA_VERSION_ATTR: semconv.SCHEMA_VERSION,
                semconv.GEN_AI_AGENT_NAME: "handmade",
                semconv.GEN_AI_OPERATION_NAME: semconv.SPAN_AGENT,
            }
        )
        tid = f"{span.get_span_context().trace_id:032x}"
    orp.flush()
    text = run("replay", tid, "--mode", "dry")
    assert text.exit_code == 0, text.stdout + text.stderr
    assert "ready to replay: no mode; not ready: mock, deterministic, live" in text.stdout
    assert "  mock: no entrypoint recorded: pass --app module:function" in text.stdout.splitlines()
    data = json.loads(run("replay", tid, "--mode", "dry", "--json").stdout)
    assert data["ready_modes"] == []


# -------------------------------------------------------------------------------------- case export


def test_case_export_creates_missing_folders(home: Path, tmp_path: Path) -> None:
    tid = record_billing()
    target = tmp_path / "ci" / "cases" / "billing" / "inv7.case.json"
    out = run("case", "export", tid, "-o", str(target))
    assert out.exit_code == 0, out.stderr
    assert json.loads(target.read_text())["otel_replay_case"]
    assert out.stderr == ""
    assert re.search(r"\(\d+ spans, mock, expect no-divergence\)", out.stdout), out.stdout


def test_case_export_warns_when_case_run_will_not_collect_the_file(home: Path, tmp_path: Path) -> None:
    tid = record_billing()
    target = tmp_path / "cases" / "inv7.json"
    out = run("case", "export", tid, "-o", str(target))
    assert out.exit_code == 0, out.stderr
    assert target.is_file()  # still written
    warnings = out.stderr.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("warning: inv7.json does not end in .case.json")
    assert "case run FOLDER" in warnings[0]
    # The warning is true: the folder yields no case.
    collected = run("case", "run", str(tmp_path / "cases"))
    assert collected.exit_code == 2 and "no case files" in collected.stderr


def test_case_run_counts_cases_in_words(home: Path, tmp_path: Path, in_tests_dir: None) -> None:
    tid = record_billing()
    out = run("case", "export", tid, "-o", str(tmp_path / "cases" / "inv7.case.json"))
    assert out.exit_code == 0, out.stderr
    result = run("case", "run", str(tmp_path / "cases"))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "1 case: 1 passed, 0 failed, 0 could not run" in result.stdout


# ------------------------------------------------------------------------------------------- errors


class _ClickHouseSaysNo(http.server.BaseHTTPRequestHandler):
    """Answers every request as a ClickHouse server does for an unknown database."""

    body = (
        b"Code: 81. DB::Exception: Database otel does not exist. (UNKNOWN_DATABASE) "
        b"(version 24.8.4.13 (official build))\n"
    )

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(404)
        self.send_header("X-ClickHouse-Exception-Code", "81")
        self.send_header("Content-Type", "text/plain; charset=UTF-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def clickhouse_says_no() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ClickHouseSaysNo)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_clickhouse_error_is_one_line_without_engine_internals(home: Path, clickhouse_says_no: int) -> None:
    out = run("runs", "--store", f"http://reader:pw-not-shown@127.0.0.1:{clickhouse_says_no}/otel")
    assert out.exit_code == 2
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "Database otel does not exist" in lines[0]
    assert not [marker for marker in INTERNALS if marker in lines[0]], lines[0]
    assert "UNKNOWN_DATABASE" not in lines[0] and "pw-not-shown" not in lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["runs", "--limit", "many"], "error: Invalid value for '--limit': expected a whole number"),
        (["runs", "--limit", "0"], "error: Invalid value for '--limit': expected at least 1"),
        (["runs", "--status", "maybe"], "error: Invalid value for '--status': 'maybe' is not one of 'ok', 'error'"),
    ],
)
def test_a_bad_option_value_is_one_line_without_validation_library_wording(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    monkeypatch.setattr(sys, "argv", ["otel-replay", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert not [marker for marker in INTERNALS if marker in lines[0]], lines[0]


def test_an_unreadable_store_folder_is_one_line_naming_the_problem(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's parent folder should be")
    out = run("show", "0123456789abcdef0123456789abcdef", "--store", f"chdb://{blocker}/store")
    assert out.exit_code == 2
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert not [marker for marker in INTERNALS if marker in lines[0]], lines[0]
    assert "[Errno" not in lines[0] and "NotADirectoryError" not in lines[0] and "FileExistsError" not in lines[0]


# ------------------------------------------------------------------------------------------- counts


def test_counts_are_words_in_tables(home: Path, in_tests_dir: None) -> None:
    tid = record_billing()
    assert "1 run, newest first" in run("runs").stdout
    replayed = run("replay", tid, "--mode", "mock")
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    audit = run("audit")
    assert audit.exit_code == 0, audit.stderr
    assert "1 replay, newest first" in audit.stdout and "replay(s)" not in audit.stdout
    assert "2 runs, newest first" in run("runs").stdout


def test_a_used_up_approval_names_the_flag_that_allows_one_more(home: Path, in_tests_dir: None) -> None:
    agents.batch_agent(["INV-1", "INV-2"])
    orp.flush()
    tid = json.loads(run("runs", "--json", "--agent", "batch-agent").stdout)[0]["trace_id"]
    agents.PAYOUTS.clear()
    out = run("replay", tid, "--mode", "live", "--reason", "re-run the batch", "--approve", "pay_out", "--json")
    assert out.exit_code == 2, out.stdout + out.stderr
    assert agents.PAYOUTS == ["INV-1"]  # the one approved execution, then the refusal
    assert json.loads(out.stdout)["refused_call"] == {
        "kind": "tool",
        "name": "pay_out",
        "step_index": 1,
        "risk": "write",
        "approve_with": "--approve pay_out:2",
    }
    agents.PAYOUTS.clear()
    again = run("replay", tid, "--mode", "live", "--reason", "re-run the batch", "--approve", "pay_out:2")
    assert again.exit_code == 0, again.stdout + again.stderr
    assert agents.PAYOUTS == ["INV-1", "INV-2"]
