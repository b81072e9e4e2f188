"""`otel-replay replay`, `diff` and `audit` as a user runs them: subprocesses on a real store.

Runs are recorded once in this process into a module home; every command then runs in a subprocess that
imports the recorded entrypoints from ``replay_agents`` (tests/ on PYTHONPATH). Side effects of the tools
(log lines, hits on a TCP server in this process) are counted across the process boundary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fork_server
import pytest
import replay_agents as ra
from cli_in_process import run_cli, runs_in_process

import otel_replay as orp

TESTS_DIR = Path(__file__).resolve().parent
RESULT_KEYS = {
    "replay_trace_id",
    "replay_run_id",
    "original_trace_id",
    "mode",
    "from_step",
    "diverged",
    "first_divergence",
    "approvals",
    "actor",
    "reason",
    "diff",
}
SECTIONS = {"output", "state", "requests", "tools", "citations", "cost", "latency", "safety"}
AUDIT_KEYS = {
    "at",
    "actor",
    "reason",
    "mode",
    "from_step",
    "approvals",
    "original_trace_id",
    "replay_trace_id",
    "diverged",
}
TOOLS = ("read_ledger", "write_ledger", "send_email")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A home with one matrix run and one flex run, a side-effect folder and a TCP server."""
    base = tmp_path_factory.mktemp("replay-cli")
    home, side = base / "home", base / "side"
    side.mkdir()
    server = ra.WireServer()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        mp.delenv("OTEL_REPLAY_STORE", raising=False)
        mp.setenv(ra.SIDE_DIR_ENV, str(side))
        mp.setenv(ra.PORT_ENV, str(server.port))
        try:
            orp.configure(home=home, exporter="spool")
            ra.FLEX.update(ra.FLEX_DEFAULTS)
            ra.matrix_agent("acc-cli")
            ra.flex_agent("refund order A1")
            orp.flush()
            world = {
                "home": home,
                "side": side,
                "server": server,
                "env": {"OTEL_REPLAY_HOME": str(home), ra.SIDE_DIR_ENV: str(side), ra.PORT_ENV: str(server.port)},
            }
            out = cli(world, "runs", "--json", "--kind", "original")
            assert out.returncode == 0, out.stderr
            world["ids"] = {r["agent"]: r["trace_id"] for r in json.loads(out.stdout)}
            assert set(world["ids"]) == {"matrix-agent", "flex-agent"}
            yield world
        finally:
            server.close()


def cli(world: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **world["env"],
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        # the commands run from a folder outside the project: trust the test agents by name
        "OTEL_REPLAY_TRUSTED_MODULES": "replay_agents",
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    if runs_in_process(args):  # read-only: the same main() in this process, when it is configured for the home
        return run_cli(args, env=env, cwd=world["home"].parent)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=world["home"].parent,
    )


def counts(world: dict[str, Any]) -> dict[str, int]:
    out = {name: ra.executions(name, world["side"]) for name in TOOLS}
    out["wire_funds"] = world["server"].hits
    return out


def delta(world: dict[str, Any], before: dict[str, int]) -> dict[str, int]:
    now = counts(world)
    return {name: now[name] - before[name] for name in now}


NOTHING = {"read_ledger": 0, "write_ledger": 0, "send_email": 0, "wire_funds": 0}


def assert_one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in out.stderr + out.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_mock_replay_json_has_the_contract_and_exits_0(world: dict[str, Any]) -> None:
    before = counts(world)
    tid = world["ids"]["matrix-agent"]
    out = cli(world, "replay", tid, "--mode", "mock", "--json", "--actor", "ci-bot", "--reason", "nightly")
    assert out.returncode == 0, (out.stdout, out.stderr)
    data = json.loads(out.stdout)
    assert set(data) >= RESULT_KEYS
    assert (
        data["original_trace_id"],
        data["mode"],
        data["from_step"],
        data["diverged"],
        data["first_divergence"],
        data["approvals"],
        data["actor"],
        data["reason"],
    ) == (tid, "mock", None, False, None, [], "ci-bot", "nightly")
    assert data["replay_trace_id"] != tid and len(data["replay_trace_id"]) == 32 and data["replay_run_id"]
    assert set(data["diff"]) == SECTIONS
    assert all(section["changed"] is False for section in data["diff"].values()), data["diff"]
    assert delta(world, before) == NOTHING


def test_diverged_replay_exits_1_with_the_first_divergence(world: dict[str, Any]) -> None:
    tid = world["ids"]["flex-agent"]
    out = cli(world, "replay", tid, "--mode", "deterministic", "--app", "replay_agents:flex_agent_variant", "--json")
    assert out.returncode == 1, (out.stdout, out.stderr)
    data = json.loads(out.stdout)
    assert data["diverged"] is True
    assert data["first_divergence"]["step_index"] == 1
    assert "planner" in data["first_divergence"]["reason"]
    assert set(data["diff"]) == SECTIONS
    # The same in text: exit 1 and the step named.
    text = cli(world, "replay", tid, "--mode", "mock", "--app", "replay_agents:flex_agent_variant")
    assert text.returncode == 1, text.stderr
    assert "first divergence at step 1" in text.stdout
    # … followed by what changed in the prompt, as diff lines.
    assert '-  "prompt": "v1 | refund order A1' in text.stdout and '+  "prompt": "v2 | refund order A1' in text.stdout
    assert data["first_divergence"]["diff"].startswith("--- recorded step 1\n+++ replay\n")


def test_live_replay_without_approval_exits_2_naming_the_tool(world: dict[str, Any]) -> None:
    tid = world["ids"]["matrix-agent"]
    before = counts(world)
    out = cli(world, "replay", tid, "--mode", "live", "--reason", "verify", "--json")
    assert out.returncode == 2, (out.stdout, out.stderr)
    data = json.loads(out.stdout)
    assert data["outcome"] == "refused" and "write_ledger" in data["refusal"]
    assert data["first_divergence"]["step_index"] == 2 and data["refused_before_start"] is True
    assert data["refused_call"]["approve_with"] == "--approve write_ledger --approve wire_funds --approve send_email"
    assert delta(world, before) == NOTHING  # refused before the agent started: not even the read ran
    # Partial live from step 1, as text: the same refusal, said once, and nothing ran.
    before = counts(world)
    text = cli(world, "replay", tid, "--mode", "live", "--from-step", "1", "--reason", "verify")
    assert text.returncode == 2, text.stderr
    refusal_lines = [line for line in text.stdout.splitlines() if line.startswith("refused:")]
    assert len(refusal_lines) == 1 and "'write_ledger'" in refusal_lines[0] and "--approve" in refusal_lines[0]
    assert delta(world, before) == NOTHING


def test_live_replay_with_approvals_runs_each_tool_once_and_is_audited(world: dict[str, Any]) -> None:
    tid = world["ids"]["matrix-agent"]
    before = counts(world)
    out = cli(
        world,
        "replay",
        tid,
        "--mode",
        "live",
        "--approve",
        "write_ledger",
        "--approve",
        "wire_funds",
        "--approve",
        "send_email",
        "--actor",
        "alice",
        "--reason",
        "verify the fix for real",
        "--json",
    )
    assert out.returncode == 0, (out.stdout, out.stderr)
    data = json.loads(out.stdout)
    assert data["approvals"] == ["write_ledger", "wire_funds", "send_email"]
    assert delta(world, before) == {"read_ledger": 1, "write_ledger": 1, "send_email": 1, "wire_funds": 1}

    audit = cli(world, "audit", "--json")
    assert audit.returncode == 0, audit.stderr
    entries = json.loads(audit.stdout)
    assert entries and all(set(e) >= AUDIT_KEYS for e in entries)
    entry = next(e for e in entries if e["replay_trace_id"] == data["replay_trace_id"])
    assert {k: entry[k] for k in AUDIT_KEYS - {"at"}} == {
        "actor": "alice",
        "reason": "verify the fix for real",
        "mode": "live",
        "from_step": None,
        "approvals": ["write_ledger", "wire_funds", "send_email"],
        "original_trace_id": tid,
        "replay_trace_id": data["replay_trace_id"],
        "diverged": False,
    }
    assert entry["at"].endswith("+00:00")
    assert [e["at"] for e in entries] == sorted((e["at"] for e in entries), reverse=True)
    assert all(e["original_trace_id"] in world["ids"].values() for e in entries)


def test_diff_json_between_runs(world: dict[str, Any]) -> None:
    tid = world["ids"]["flex-agent"]
    same = json.loads(cli(world, "replay", tid, "--mode", "mock", "--json").stdout)
    out = cli(world, "diff", tid, same["replay_trace_id"], "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data["sections"]) == SECTIONS and data["changed"] is False
    assert (data["a"], data["b"]) == (tid, same["replay_trace_id"])
    assert all({"changed", "summary", "details"} <= set(s) for s in data["sections"].values())
    # Two different runs: exit 1, and the sections say what changed.
    other = cli(world, "diff", tid, world["ids"]["matrix-agent"], "--json")
    assert other.returncode == 1, other.stderr
    changed = {name for name, s in json.loads(other.stdout)["sections"].items() if s["changed"]}
    assert {"output", "tools"} <= changed


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("replay", "ab" * 16, "--mode", "mock"), ("abababab", "otel-replay runs")),
        (("replay", "xyz", "--mode", "mock"), ("trace id",)),
        (("replay", "{matrix}", "--mode", "live"), ("--reason",)),
        (("replay", "{matrix}", "--mode", "live", "--reason", "   "), ("--reason",)),
        (("replay", "{matrix}", "--mode", "dry", "--from-step", "1"), ("--from-step",)),
        (("diff", "{matrix}", "cd" * 16), ("cdcdcdcd",)),
    ],
    ids=[
        "unknown-trace",
        "malformed-id",
        "live-no-reason",
        "live-blank-reason",
        "dry-from-step",
        "diff-unknown-trace",
    ],
)
def test_refusals_are_one_line_and_exit_2(
    world: dict[str, Any], args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    before = counts(world)
    out = cli(world, *(a.format(matrix=world["ids"]["matrix-agent"]) for a in args))
    assert_one_line_error(out, *needles)
    assert out.stdout == ""
    assert delta(world, before) == NOTHING


def test_an_entrypoint_that_does_not_import_is_one_line_and_exit_125(world: dict[str, Any]) -> None:
    """The code as it stands cannot be tested: exit 125, the code ``git bisect run`` skips a commit on."""
    before = counts(world)
    out = cli(world, "replay", world["ids"]["matrix-agent"], "--mode", "mock", "--app", "no_such_agent_module:agent")
    assert out.returncode == 125, (out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "no_such_agent_module" in lines[0], out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert delta(world, before) == NOTHING


def test_unknown_mode_is_a_one_line_error(world: dict[str, Any]) -> None:
    out = cli(world, "replay", world["ids"]["matrix-agent"], "--mode", "bogus")
    assert_one_line_error(out, "bogus")


def test_dry_replays_are_audited_but_listed_only_when_asked_for(world: dict[str, Any]) -> None:
    """A dry replay is a run with no step: ``runs`` leaves it out unless ``--kind dry``, ``--kind replay`` or
    ``--all`` asks for it, and the audit lists it like any replay."""
    matrix = world["ids"]["matrix-agent"]
    out = cli(world, "replay", matrix, "--mode", "dry", "--json")
    assert out.returncode == 0, out.stderr
    dry = json.loads(out.stdout)["replay_trace_id"]

    def listed(*args: str) -> set[str]:
        out = cli(world, "runs", "--json", "--limit", "1000", *args)
        assert out.returncode == 0, out.stderr
        return {r["trace_id"] for r in json.loads(out.stdout)}

    assert matrix in listed() and dry not in listed()
    assert dry in listed("--kind", "replay")  # every replay, as the audit reads them
    assert listed("--kind", "dry") >= {dry} and matrix not in listed("--kind", "dry")
    assert listed("--all") >= {dry, matrix}
    audit = cli(world, "audit", "--json")
    assert audit.returncode == 0, audit.stderr
    assert [row["mode"] for row in json.loads(audit.stdout) if row["replay_trace_id"] == dry] == ["dry"]
    assert_one_line_error(cli(world, "runs", "--kind", "replay", "--all"), "--kind or --all")
