"""``otel-replay lab`` from the command line: local worker processes, ``--json`` holding only JSON on stdout, the
``--fail-if`` gate's exit codes, Ctrl-C (exit 130), and bad flags (one error line, exit 2).

The labs that replay run as processes of their own (the worker processes, the side-effect guard and the
agents' imports are part of what is tested); flags refused before anything replays run in this process.
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
import lab_agents
import pytest
from cli_in_process import run_cli

import otel_replay as orp
from otel_replay.demo import agent as demo

TESTS_DIR = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("lab-cli")
    home = base / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        mp.delenv(lab_agents.INTERRUPT_ENV, raising=False)
        orp.configure(home=home, exporter="spool")
        for question, customer in demo.QUESTIONS * 2:
            try:
                demo.support_agent(question, customer=customer)
            except KeyError:
                pass  # the demo's unknown order, on purpose
        for n in range(3):
            lab_agents.counter_agent(n)
        orp.flush()
        with orp.Store.open() as store:
            runs = store.runs(kind="original", limit=100)
        yield {
            "home": home,
            "demo": [r.trace_id for r in runs if r.agent == "support-agent"],
            "counter": [r.trace_id for r in runs if r.agent == "counter-agent"],
            "refunds": (home / "refunds.log").read_text(encoding="utf-8"),
        }


def cli(world: dict[str, Any], *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        # the command runs from a folder outside the project: trust the test agents by name
        "OTEL_REPLAY_TRUSTED_MODULES": "lab_agents",
        **(extra_env or {}),
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    return fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", "lab", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=world["home"].parent,
    )


def assert_one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: "), lines
    assert "Traceback" not in out.stderr + out.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]


def _compared(pair: dict[str, Any]) -> tuple[Any, ...]:
    """What must not depend on where a replay ran (timings aside)."""
    return (pair["outcome"], pair["output_hash"], pair["scores"].get("output_equal"), pair["first_divergence"])


def test_json_from_worker_processes_is_the_only_stdout_and_matches_the_in_process_lab(world: dict[str, Any]) -> None:
    out = cli(world, "--agent", "support-agent", "--workers", "2", "--json", "--fail-if", "diverged > 0")

    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)  # nothing but the document: the agent's own output went to stderr
    assert document["spec"]["workers"] == 2 and document["interrupted"] is False and document["failed"] is False
    (gate,) = document["gates"]
    assert (gate["expression"], gate["held"], gate["value"]) == ("diverged > 0", False, 0.0)
    pooled = {r["original_trace_id"]: _compared(r) for r in document["runs"]}
    assert set(pooled) == set(world["demo"])
    assert (world["home"] / "refunds.log").read_text(encoding="utf-8") == world["refunds"]

    in_process = orp.lab(agent="support-agent", workers=1)
    assert pooled == {p.original_trace_id: _compared(p.to_dict()) for p in in_process.pairs}
    counted = ("runs", "replays", "matched", "diverged", "refused", "errors")  # not the scorers this process has
    assert {k: document["summary"]["totals"][k] for k in counted} == {
        k: in_process.summary["totals"][k] for k in counted
    }
    # the workers' replays were ingested by the lab process: runs --lab lists them
    listed = json.loads(run_cli(["runs", "--lab", document["lab_id"], "--json"]).stdout)
    assert sorted(r["trace_id"] for r in listed) == sorted(r["replay_trace_id"] for r in document["runs"])


def test_a_gate_that_holds_exits_1(world: dict[str, Any]) -> None:
    out = cli(world, "--agent", "counter-agent", "--workers", "1", "--fail-if", "matched > 0")

    assert out.returncode == 1, out.stderr
    assert "matched > 0" in out.stdout


def test_ctrl_c_exits_130_and_reports_what_finished(world: dict[str, Any]) -> None:
    with orp.Store.open() as store:
        inputs = [store.load_run(t).snapshots["input"]["args"][0] for t in world["counter"]]
    out = cli(
        world,
        "--agent",
        "counter-agent",
        "--workers",
        "1",
        "--json",
        extra_env={lab_agents.INTERRUPT_ENV: str(inputs[1])},
    )

    assert out.returncode == 130, out.stderr
    document = json.loads(out.stdout)
    assert document["interrupted"] is True
    assert [r["original_trace_id"] for r in document["runs"]] == world["counter"][:1]
    assert "Traceback" not in out.stderr


def test_an_interrupt_inside_a_worker_process_stops_the_lab_and_keeps_the_other_replays(world: dict[str, Any]) -> None:
    with orp.Store.open() as store:
        inputs = {t: store.load_run(t).snapshots["input"]["args"][0] for t in world["counter"]}
    stopped = world["counter"][1]
    out = cli(
        world,
        "--agent",
        "counter-agent",
        "--workers",
        "2",
        "--json",
        extra_env={lab_agents.INTERRUPT_ENV: str(inputs[stopped])},
    )

    assert out.returncode == 130, out.stderr
    document = json.loads(out.stdout)
    assert document["interrupted"] is True
    kept = [r["original_trace_id"] for r in document["runs"]]
    assert stopped not in kept and set(kept) <= set(world["counter"])
    assert {r["outcome"] for r in document["runs"]} <= {"matched"}
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--inject", "lookup_order:error=explode"], ["--inject", "timeout|exception|empty|value=JSON"]),
        (["--inject", "lookup_order"], ["--inject"]),
        (["--inject", "lookup_order:error=value={bad"], ["not JSON"]),
        (["--inject", "lookup_order:error=timeout:p=2"], ["p must be between 0 and 1"]),
        (["--fail-if", "diverged >> 0"], ["--fail-if"]),
        (["--set-param", "=3"], ["--set-param"]),
        (["--tag", "no-equals"], ["--tag"]),
        (["--since", "last tuesday"], ["--since", "ISO"]),
        (["--prompt-file", "system=/no/such/prompt.txt"], ["--prompt-file", "cannot be read"]),
        (["--mode", "whatif"], ["reason"]),
        (["--tool-live", "issue_refund"], ["reason"]),
        (["--agent", "no-such-agent"], ["cohort is empty"]),
        (["--mode", "replay-everything"], ["--mode"]),
    ],
)
def test_bad_flags_are_one_error_line_and_exit_2(world: dict[str, Any], args: list[str], needles: list[str]) -> None:
    out = run_cli(["lab", *args], env={**os.environ, "OTEL_REPLAY_HOME": str(world["home"])})

    assert_one_line_error(out, *needles)
    assert out.stdout == ""


def test_ray_executor_without_ray_says_how_to_install_it(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed: `import ray` fails
    out = run_cli(
        ["lab", "--agent", "counter-agent", "--executor", "ray"],
        env={**os.environ, "OTEL_REPLAY_HOME": str(world["home"])},
    )
    assert_one_line_error(out, "pip install 'otel-replay[ray]'")
