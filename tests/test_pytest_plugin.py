"""The pytest plugin, run in a subprocess against a sample project: case files under the configured folder are
collected as one test item each, fail with the diff, and work with ``-k``, ``-x`` and pytest-xdist."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_children import UNRELATED_PLUGINS

from otel_replay.cases import case_document, write_case
from otel_replay.replay.safety import landlock
from otel_replay.testing import capture

AGENT = """
import functools

import otel_replay as orp

REFUND_CENTS = 1500


@orp.model("desk_llm", provider="scripted", model="scripted-1")
def desk_llm(prompt):
    return {"text": "ok: " + prompt}


@orp.tool("find_order", risk="read")
def find_order(order_id):
    return {"order_id": order_id, "status": "delivered"}


@orp.tool("refund", risk="write")
def refund(order_id, cents):
    raise RuntimeError("a test run must never refund for real")


@orp.agent("plugin-desk")
def handle(question):
    order = find_order(question.split()[-1])
    if question.startswith("refund"):
        refund(order["order_id"], REFUND_CENTS)
    return {"reply": desk_llm(question + ": " + order["status"])["text"]}


@orp.agent("plugin-desk")
def refunding(cents, question):
    order = find_order(question.split()[-1])
    if question.startswith("refund"):
        refund(order["order_id"], cents)
    return {"reply": desk_llm(question + ": " + order["status"])["text"]}


as_recorded = functools.partial(refunding, 1500)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A sample project: its agent module, one unit test, and three recorded cases; then the agent's refund
    amount is edited, which only the refund case can notice."""
    root = tmp_path_factory.mktemp("sample-project")
    (root / "plugin_desk.py").write_text(AGENT, encoding="utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "test_unit.py").write_text("def test_unit():\n    assert 1 + 1 == 2\n", encoding="utf-8")
    (root / "regression").mkdir()
    (root / "pyproject.toml").write_text(
        textwrap.dedent("""
        [tool.pytest.ini_options]
        testpaths = ["tests"]
        otel_replay_cases = ["regression"]
    """),
        encoding="utf-8",
    )
    sys.path.insert(0, str(root))
    try:
        desk = importlib.import_module("plugin_desk")
        cases = {"a_refund": "refund order A1", "b_lookup": "where is order B2", "c_status": "status of C3"}
        for name, question in cases.items():
            with capture(home=root / "home") as recorded:
                _record(desk, question)
            (run,) = recorded.runs()
            write_case(
                case_document(run, name=name, expect=["no-divergence", "tools"]),
                root / "regression" / f"{name}.case.json",
            )
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("plugin_desk", None)
    (root / "plugin_desk.py").write_text(AGENT.replace("REFUND_CENTS = 1500", "REFUND_CENTS = 900"), encoding="utf-8")
    yield root


def _record(desk: Any, question: str) -> None:
    """Record with a refund that answers instead of raising (the recorded run must have a refund step)."""
    original = desk.refund
    import otel_replay as orp

    @orp.tool("refund", risk="write")
    def refund(order_id: str, cents: int) -> dict[str, Any]:
        return {"order_id": order_id, "refunded_cents": cents}

    desk.refund = refund
    try:
        desk.handle(question)
    finally:
        desk.refund = original


def pytest_run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OTEL_REPLAY_HOME": str(project / "home")}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *UNRELATED_PLUGINS, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=300,
    )


def outcome(out: subprocess.CompletedProcess[str]) -> dict[str, int]:
    last = [line for line in out.stdout.splitlines() if line.strip()][-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|deselected|error)", last)}


def test_each_case_is_an_item_and_a_changed_agent_fails_with_the_diff(project: Path) -> None:
    out = pytest_run(project, "-v")
    assert out.returncode == 1, out.stdout + out.stderr
    assert outcome(out) == {"failed": 1, "passed": 3}, out.stdout
    assert "regression/a_refund.case.json::a_refund FAILED" in out.stdout
    assert "regression/b_lookup.case.json::b_lookup PASSED" in out.stdout
    assert "tests/test_unit.py::test_unit PASSED" in out.stdout
    assert "first divergence at step 1 (arguments)" in out.stdout
    assert "diff tools: 1 changed" in out.stdout
    assert "a test run must never refund for real" not in out.stdout  # the write tool was never executed


def test_k_selects_cases_by_name(project: Path) -> None:
    out = pytest_run(project, "-k", "lookup or status")
    assert out.returncode == 0, out.stdout
    assert outcome(out) == {"passed": 2, "deselected": 2}


def test_x_stops_at_the_first_failing_case(project: Path) -> None:
    out = pytest_run(project, "-x", "regression")
    assert out.returncode == 1
    assert outcome(out) == {"failed": 1}, out.stdout


def test_cases_run_under_xdist(project: Path) -> None:
    out = pytest_run(project, "-n", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert outcome(out) == {"failed": 1, "passed": 3}, out.stdout
    assert "first divergence at step 1 (arguments)" in out.stdout


def test_mode_and_folder_from_the_command_line(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "more-cases"
    other.mkdir()
    (other / "d_copy.case.json").write_text((project / "regression" / "b_lookup.case.json").read_text())
    out = pytest_run(
        project, f"--otel-replay-cases={other}", "--otel-replay-mode", "deterministic", "-k", "lookup or copy", "-v"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert outcome(out) == {"passed": 2, "deselected": 3}, out.stdout
    assert "d_copy.case.json::b_lookup PASSED" in out.stdout


def test_app_runs_every_case_through_the_entrypoint_given(project: Path, tmp_path: Path) -> None:
    """``--otel-replay-app`` (ini ``otel_replay_app``) is the user's entrypoint, as ``case run --app``: one the case
    rule would refuse from a case file (a ``functools.partial``, not defined in its module) runs, and the refund
    case that fails with the edited agent passes with the one that still refunds as recorded."""
    out = pytest_run(project, "--otel-replay-app", "plugin_desk:as_recorded", "-k", "refund", "-v")
    assert out.returncode == 0, out.stdout + out.stderr
    assert outcome(out) == {"passed": 1, "deselected": 3}, out.stdout
    ini = tmp_path / "app.ini"
    ini.write_text(
        f"[pytest]\notel_replay_cases = {project / 'regression'}\notel_replay_app = plugin_desk:as_recorded\n"
    )
    out = pytest_run(project, "-c", str(ini), "--rootdir", str(project), "regression", "-v")
    assert out.returncode == 0, out.stdout + out.stderr
    assert outcome(out) == {"passed": 3}, out.stdout


def test_a_case_naming_an_entrypoint_from_another_module_fails_with_the_reason(project: Path, tmp_path: Path) -> None:
    """The same name read from a case file is data: refused, and the failure says how to run it."""
    other = tmp_path / "named"
    other.mkdir()
    document = json.loads((project / "regression" / "a_refund.case.json").read_text())
    document["entrypoint"] = "plugin_desk:as_recorded"
    (other / "named.case.json").write_text(json.dumps(document))
    out = pytest_run(project, f"--otel-replay-cases={other}", str(other))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "is not defined in plugin_desk" in out.stdout and "--app" in out.stdout, out.stdout


def test_a_case_whose_agent_a_test_imported_first_says_what_it_cannot_promise(project: Path, tmp_path: Path) -> None:
    """A unit test imported the agent module before its case ran: what the module opened at import is outside the
    kernel sandbox, and pytest's warnings summary says so for that case (the replay's note)."""
    copy = tmp_path / "project"
    shutil.copytree(project, copy)
    (copy / "tests" / "test_agent_unit.py").write_text("import plugin_desk\n\n\ndef test_imported():\n    pass\n")
    out = pytest_run(copy, "-k", "imported or lookup", "-p", "no:randomly")
    assert out.returncode == 0, out.stdout + out.stderr
    assert outcome(out) == {"passed": 2, "deselected": 3}, out.stdout
    if landlock.abi() > 0:
        assert "CaseNote: b_lookup: the agent's module 'plugin_desk' was imported before this replay" in out.stdout
    else:  # no kernel sandbox, nothing it could have promised
        assert "CaseNote" not in out.stdout


def test_a_broken_case_file_is_a_collection_error_naming_it(project: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad.case.json").write_text('{"otel_replay_case": 99}')
    out = pytest_run(project, f"--otel-replay-cases={broken}", str(broken))
    assert out.returncode != 0
    assert "bad.case.json" in out.stdout and "upgrade otel-replay" in out.stdout
    assert "Traceback" not in out.stdout


def test_without_configured_folders_case_files_are_not_collected(project: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "tests").mkdir(parents=True)
    (plain / "tests" / "x.case.json").write_text((project / "regression" / "b_lookup.case.json").read_text())
    (plain / "tests" / "test_one.py").write_text("def test_one():\n    pass\n")
    out = pytest_run(plain)
    assert out.returncode == 0 and outcome(out) == {"passed": 1}, out.stdout
