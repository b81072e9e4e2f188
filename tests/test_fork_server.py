"""The suite's fork server forks where a fresh process would run the same, and only there (``fork_server.py``).

A server that cannot fork in the suite's own environment makes every CLI and agent command a fresh interpreter:
the suite stays correct but takes minutes longer (on Debian's Python, whose ``sitecustomize`` the server once
took for a difference, every call did).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import fork_server
import pytest


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if os.environ.get(fork_server.SWITCH) == "0" or fork_server._coverage_measuring():
        pytest.skip("every command runs as a subprocess in this run")
    log = tmp_path / "calls.log"
    monkeypatch.setenv(fork_server.LOG, str(log))
    return log


def _version(env: dict[str, str], cwd: Path) -> str:
    result = fork_server.run(
        [sys.executable, "-m", "otel_replay.cli", "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_command_in_the_suites_own_environment_is_forked(calls: Path, tmp_path: Path) -> None:
    assert "otel-replay" in _version(dict(os.environ), tmp_path)
    assert calls.read_text().splitlines() == ["fork"], (
        "the fork server refused a plain call in the suite's own environment: every command of the suite runs "
        "as a fresh interpreter"
    )


def test_a_sitecustomize_only_the_call_would_run_makes_it_a_subprocess(calls: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "sitecustomize.py").write_text("import sys\nsys.stdout.write('sitecustomize ran\\n')\n")
    env = dict(os.environ, PYTHONPATH=str(extra))
    out = _version(env, tmp_path)
    assert out.startswith("sitecustomize ran\n") and "otel-replay" in out
    assert calls.read_text().splitlines() == ["subprocess: module sitecustomize would be found elsewhere"]
