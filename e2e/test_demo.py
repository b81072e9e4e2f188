"""The demo agent end to end, every command a fresh process: ``make demo``'s own command and the commands it and
the README send the user to, then a user's own program around the demo agent through every stage (record →
``runs`` → ``show`` → replay in every mode → ``diff`` → ``case export`` → ``case run`` and pytest → ``lab``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from conftest import User, trace_ids

AGENTS = Path(__file__).resolve().parent / "agents"
FIXED = "otel_replay.demo.agent:support_agent_fixed"


def test_make_demo_and_the_commands_it_and_the_readme_name(user: User) -> None:
    out = user.run("otel-replay", "demo")
    assert "PASS support-unknown-order" in out.stdout
    cases = user.otel_replay_home / "cases"
    # the commands the demo ends with, as it prints them
    (printed,) = [line for line in out.stdout.splitlines() if line.startswith("Next: ")]
    assert f"otel-replay case run {cases}" in printed, printed

    runs = user.json("otel-replay", "runs")
    originals = trace_ids(runs, kind="original", agent="support-agent")
    (failed,) = trace_ids(runs, kind="original", status="error")
    assert len(originals) == 3 and len(trace_ids(runs, kind="replay")) == 2, runs
    shown = user.json("otel-replay", "show", failed)
    assert shown["status"] == "error" and [s["kind"] for s in shown["steps"]][:1] == ["retrieval"], shown
    mock = user.json("otel-replay", "replay", failed, "--mode", "mock")
    assert mock["outcome"] == "matched", mock  # the failure, reproduced
    # the README's step 2: the fix, live from step 2, refunds approved for this replay
    fixed = user.json(
        "otel-replay",
        *("replay", failed, "--mode", "live", "--from-step", "2", "--approve", "issue_refund"),
        *("--reason", "verify the fix for unknown order ids", "--app", FIXED),
        ok=(1,),
    )
    assert fixed["outcome"] == "diverged" and fixed["diff"]["output"]["changed"], fixed
    page = user.cwd / "diff.html"
    user.run("otel-replay", "diff", failed, fixed["replay_trace_id"], "--html", str(page), ok=(1,))  # 1: changed
    assert "<html" in page.read_text(encoding="utf-8")[:500].lower()
    audit = user.json("otel-replay", "audit")
    assert {row["reason"] for row in audit} >= {"verify the fix for unknown order ids"}, audit

    case = user.cwd / "cases" / "unknown-order.case.json"
    user.run("otel-replay", "case", "export", fixed["replay_trace_id"], "-o", str(case), "--expect", "output")
    ran = user.json("otel-replay", "case", "run", str(case.parent), str(cases))
    assert (ran["passed"], ran["failed"], ran["error"]) == (2, 0, 0), ran
    # the README's backtest: the agent's recorded runs (its originals) replayed, gated
    lab = user.json("otel-replay", "lab", "--agent", "support-agent", "--fail-if", "diverged > 0")
    totals = lab["summary"]["totals"]
    assert (totals["runs"], totals["matched"], totals["diverged"]) == (3, 3, 0), totals


def test_a_users_program_around_the_demo_agent_through_every_stage(user: User) -> None:
    shutil.copy(AGENTS / "demo_desk.py", user.cwd / "demo_desk.py")
    out = user.run("python", "demo_desk.py", "Please refund order 1042, the kettle leaks.")
    assert "Refund of 89.0 EUR for order 1042 is issued" in out.stdout, out.stdout
    ledger = user.otel_replay_home / "refunds.log"
    assert ledger.read_text().splitlines() == ["refund order=1042 amount_eur=89.0"]

    (trace_id,) = trace_ids(user.json("otel-replay", "runs", "--agent", "support-agent"), kind="original")
    steps = [(s["kind"], s["name"]) for s in user.json("otel-replay", "show", trace_id)["steps"]]
    assert ("tool", "issue_refund") in steps, steps

    readiness = user.json("otel-replay", "replay", trace_id, "--mode", "dry")["readiness"]
    assert readiness["modes"]["mock"]["ready"] and readiness["modes"]["deterministic"]["ready"], readiness
    assert readiness["modes"]["live"]["needs_approval"] == ["issue_refund"], readiness
    replays = {}
    for mode in ("mock", "deterministic"):
        replays[mode] = user.json("otel-replay", "replay", trace_id, "--mode", mode)
        assert replays[mode]["outcome"] == "matched", replays[mode]
    whatif = user.json("otel-replay", "replay", trace_id, "--mode", "whatif", "--reason", "e2e")
    assert whatif["outcome"] == "matched", whatif
    assert len(ledger.read_text().splitlines()) == 1  # no replay so far refunded
    refused = user.run("otel-replay", "replay", trace_id, "--mode", "live", "--reason", "e2e", ok=(2,))
    assert "issue_refund" in refused.stdout + refused.stderr
    live = user.json(
        "otel-replay", "replay", trace_id, "--mode", "live", "--reason", "e2e", "--approve", "issue_refund"
    )
    assert live["outcome"] == "matched", live
    assert len(ledger.read_text().splitlines()) == 2  # the approved live replay refunded, once

    diff = user.json("otel-replay", "diff", trace_id, replays["deterministic"]["replay_trace_id"])
    changed = {name for name, section in diff["sections"].items() if section["changed"]} - {"latency"}
    assert changed == set(), diff
    case = user.cwd / "cases" / "refund.case.json"
    user.run("otel-replay", "case", "export", trace_id, "-o", str(case), "--expect", "output", "--expect", "tools")
    ran = user.json("otel-replay", "case", "run", str(case.parent))
    assert ran["passed"] == 1, ran
    # the same case through the pytest plugin, in the user's project folder
    (user.cwd / "pyproject.toml").write_text('[tool.pytest.ini_options]\notel_replay_cases = ["cases"]\n')
    tested = user.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert re.search(r"\b1 passed\b", tested.stdout), tested.stdout
    lab = user.json("otel-replay", "lab", "--trace-id", trace_id, "--fail-if", "diverged > 0")
    assert lab["summary"]["totals"]["matched"] == 1, lab["summary"]["totals"]
    assert len(ledger.read_text().splitlines()) == 2  # cases, pytest and the lab never refunded
