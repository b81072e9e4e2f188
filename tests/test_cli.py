"""The `otel-replay` command end to end: each test runs it as a user would, in a subprocess, on a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import fork_server
import pytest
from cli_in_process import run_cli, runs_in_process

from otel_replay import configure

RUN_KEYS = {"trace_id", "run_id", "agent", "status", "started_at", "duration_ms", "kind", "replay_of"}
SHOW_KEYS = {"trace_id", "run_id", "agent", "status", "snapshots", "steps"}
STEP_KEYS = {"index", "kind", "name", "status", "span_id", "parent_span_id", "snapshots"}


def cli(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "OTEL_REPLAY_HOME": str(home), "COLUMNS": "200", **(env or {})}
    full_env.pop("OTEL_REPLAY_STORE", None)
    if env and "OTEL_REPLAY_STORE" in env:
        full_env["OTEL_REPLAY_STORE"] = env["OTEL_REPLAY_STORE"]
    if runs_in_process(args):  # the same main(), without a second of interpreter start-up
        return run_cli(args, env=full_env)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )


def assert_one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in out.stderr + out.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def demo_recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home where ``otel-replay demo`` (a process of its own) recorded the demo's runs, once per module."""
    home = tmp_path_factory.mktemp("demo-home")
    out = cli(home, "demo")
    assert out.returncode == 0, out.stderr
    return home


@pytest.fixture
def demo_home(demo_recorded: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo's home, with this process configured for it as a fresh ``otel-replay`` process would configure
    itself from the commands' environment: the read-only commands then run in this process
    (``tests/cli_in_process.py``); the others still run in a process of their own."""
    monkeypatch.setenv("OTEL_REPLAY_HOME", str(demo_recorded))
    for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    configure(home=demo_recorded, exporter="spool")
    return demo_recorded


def runs_json(home: Path, *args: str) -> list[dict[str, Any]]:
    out = cli(home, "runs", "--json", "--kind", "original", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_demo_records_lists_and_shows(demo_home: Path) -> None:
    out = cli(demo_home, "runs")
    assert out.returncode == 0
    assert "support-agent" in out.stdout
    runs = runs_json(demo_home)
    assert len(runs) == 3
    assert all(set(r) >= RUN_KEYS for r in runs)
    assert sorted(r["status"] for r in runs) == ["error", "ok", "ok"]
    assert [r["started_at"] for r in runs] == sorted((r["started_at"] for r in runs), reverse=True)
    assert all(r["kind"] == "original" and r["replay_of"] is None for r in runs)


def test_runs_filters_and_limit(demo_home: Path) -> None:
    assert [r["status"] for r in runs_json(demo_home, "--status", "error")] == ["error"]
    assert len(runs_json(demo_home, "--status", "ok")) == 2
    assert len(runs_json(demo_home, "--limit", "1")) == 1
    assert runs_json(demo_home, "--agent", "nobody") == []


def test_show_json_has_steps_and_every_snapshot_kind(demo_home: Path) -> None:
    refund = next(r for r in runs_json(demo_home, "--status", "ok") if r["step_count"] == 5)
    out = cli(demo_home, "show", refund["trace_id"], "--json")
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    assert set(run) >= SHOW_KEYS
    assert run["trace_id"] == refund["trace_id"]
    assert {"input", "config", "output"} <= set(run["snapshots"])
    assert run["snapshots"]["input"]["args"] == ["Please refund order 2077, it arrived broken."]
    assert run["snapshots"]["input"]["files"][0]["name"] == "receipt.txt"
    steps = run["steps"]
    assert [s["index"] for s in steps] == list(range(len(steps)))
    assert all(set(s) >= STEP_KEYS for s in steps)
    assert [(s["kind"], s["name"]) for s in steps] == [
        ("retrieval", "kb_search"),
        ("model", "support_llm"),
        ("tool", "lookup_order"),
        ("tool", "issue_refund"),
        ("model", "support_llm"),
    ]
    refund_step = steps[3]
    assert refund_step["snapshots"]["tool"]["approval_status"] == "approved"
    assert refund_step["snapshots"]["tool"]["risk"] == "high"
    kinds = set(run["snapshots"]) | {k for s in steps for k in s["snapshots"]}
    assert kinds == {"input", "config", "context", "retrieval", "state", "tool", "model", "output"}
    assert all(s["parent_span_id"] for s in steps)
    assert run["problems"] == []


def test_show_text_renders_a_tree(demo_home: Path) -> None:
    error_run = runs_json(demo_home, "--status", "error")[0]
    out = cli(demo_home, "show", error_run["trace_id"])
    assert out.returncode == 0, out.stderr
    assert "invoke_agent support-agent" in out.stdout
    assert "lookup_order" in out.stdout and "KeyError" in out.stdout


def test_the_failed_run_keeps_its_exception_and_the_retry(demo_home: Path) -> None:
    error_run = runs_json(demo_home, "--status", "error")[0]
    run = json.loads(cli(demo_home, "show", error_run["trace_id"], "--json").stdout)
    assert run["status"] == "error"
    assert run["snapshots"]["output"]["error"]["type"] == "KeyError"
    status_run = next(r for r in runs_json(demo_home, "--status", "ok") if r["step_count"] == 6)
    steps = json.loads(cli(demo_home, "show", status_run["trace_id"], "--json").stdout)["steps"]
    inventory = [s for s in steps if s["name"] == "check_inventory"]
    assert [(s["status"], s["attempt"]) for s in inventory] == [("error", 1), ("ok", 2)]


@pytest.mark.parametrize("bad", ["nothex", "1234", "' OR 1=1 --" + "0" * 20, "0" * 32])
def test_malformed_trace_ids_are_one_line_errors(demo_home: Path, bad: str) -> None:
    assert_one_line_error(cli(demo_home, "show", bad), "trace id")


def test_unknown_trace_id_is_one_line_error(demo_home: Path) -> None:
    assert_one_line_error(cli(demo_home, "show", "ab" * 16), "abababab")


def test_unreachable_store_is_one_line_error(tmp_path: Path) -> None:
    out = cli(tmp_path, "runs", env={"OTEL_REPLAY_STORE": "http://user:s3cretpw@127.0.0.1:9/db"})
    assert_one_line_error(out)
    assert "s3cretpw" not in out.stderr


def test_busy_store_is_one_line_error_naming_the_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sys
        from otel_replay.storage.store import Store
        store = Store.open()
        print("ready", flush=True)
        sys.stdin.readline()  # holds the store until the test is done with it
    """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OTEL_REPLAY_HOME": str(tmp_path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        out = cli(tmp_path, "runs", env={"OTEL_REPLAY_LOCK_TIMEOUT": "0.5"})
        assert_one_line_error(out, str(holder.pid))
    finally:
        holder.kill()
        holder.wait()


def test_db_init_print_needs_no_store(tmp_path: Path) -> None:
    out = cli(tmp_path / "nothing-here", "db", "init", "--print", "--ttl", "7")
    assert out.returncode == 0, out.stderr
    assert "CREATE TABLE IF NOT EXISTS" in out.stdout and "otel_traces_trace_id_ts_mv" in out.stdout
    assert "toIntervalDay(7)" in out.stdout
    assert not (tmp_path / "nothing-here" / "store").exists()


@pytest.mark.parametrize("sdk", ["openai", "langgraph"])
def test_sdk_demos_record_and_replay_without_calling_out(tmp_path: Path, sdk: str) -> None:
    out = cli(tmp_path, "demo", "--sdk", sdk)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": matched") == 2, out.stdout
    if sdk == "openai":
        assert "HTTP requests the replays sent to the OpenAI server: 0" in out.stdout
    assert "sk-demo-" not in out.stdout
