"""The end-to-end stage: the product run as its users run it, each command a fresh process.

``make test`` forks its CLI and agent commands from one warm interpreter (``tests/fork_server.py``): fast, but
every command shares one hash seed, preloaded SDKs, a frozen GC and an exit that skips the interpreter's own.
Here nothing is forked or preloaded: every agent starts as ``python agent.py`` and every command as the installed
``otel-replay`` console script, a process of its own with its own ``PYTHONHASHSEED``, in a home under a fresh
``HOME`` (the default ``~/.otel-replay``), as a user's shell would start them.

The seeds come from one base seed, printed in the header and the summary (``e2e: ... PYTHONHASHSEED per command
drawn from base seed N``); ``make e2e E2E_SEED=N`` draws the same seeds again. Each command is echoed with its seed
(``$ PYTHONHASHSEED=S otel-replay ...``), and pytest shows those lines for a failing test, so one command can be
rerun by hand.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
sys.path.insert(0, str(TESTS))  # the suite's fake LLM server and its skip check

pytest_plugins = ("skip_check",)

# drawn once, in the pytest process that starts the xdist workers: they inherit it through the environment
os.environ["E2E_SEED"] = os.environ.get("E2E_SEED") or str(random.SystemRandom().randrange(1 << 32))
BASE_SEED = int(os.environ["E2E_SEED"])
"""Every command's hash seed is drawn from this one (``E2E_SEED`` sets it)."""

CONSOLE_SCRIPT = shutil.which("otel-replay", path=str(Path(sys.executable).parent))

# What a user's shell would not have: settings of this test run, and every exporter or store it points at.
_NOT_INHERITED = ("OTEL_", "PYTEST_", "PYTHONHASHSEED", "COV_", "COVERAGE_", "HYPOTHESIS_", "E2E_")


SEED_LINE = (
    f"e2e: every command a fresh process; PYTHONHASHSEED per command drawn from base seed {BASE_SEED} "
    f"(again: make e2e E2E_SEED={BASE_SEED})"
)


def pytest_report_header(config: pytest.Config) -> str:
    return SEED_LINE


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.write_line(SEED_LINE)  # also under -q, which shows no header


@dataclass
class User:
    """A user's machine for one test: a fresh ``HOME``, a temp folder of its own, a working directory, and the
    environment their shell gives every command. :meth:`run` starts one command as a fresh process."""

    home: Path
    cwd: Path
    env: dict[str, str]
    seeds: random.Random
    commands: list[str] = field(default_factory=list)

    @property
    def otel_replay_home(self) -> Path:
        return self.home / ".otel-replay"

    def run(
        self, *argv: str, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (``otel-replay`` means the installed console script, ``python`` this interpreter) in a
        fresh process with a hash seed of its own; fail the test when it exits with a code not in ``ok``."""
        seed = str(self.seeds.randrange(1, 1 << 32))
        program = {"otel-replay": CONSOLE_SCRIPT, "python": sys.executable}.get(argv[0], argv[0])
        assert program, "no otel-replay console script next to this Python: pip install -e ."
        shown = f"$ PYTHONHASHSEED={seed} {shlex.join(argv)}"
        print(shown)  # pytest shows a failing test's output: the command and its seed
        self.commands.append(shown)
        out = subprocess.run(
            [program, *argv[1:]],
            capture_output=True,
            text=True,
            env={**self.env, **(env or {}), "PYTHONHASHSEED": seed},
            cwd=cwd or self.cwd,
            timeout=240,
        )
        assert out.returncode in ok, f"{shown}\nexit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
        assert "Traceback (most recent call last)" not in out.stderr, f"{shown}\n{out.stderr}"
        return out

    def json(self, *argv: str, ok: tuple[int, ...] = (0,), **kwargs: Any) -> Any:
        """``run(*argv, "--json")``, its standard output parsed."""
        return json.loads(self.run(*argv, "--json", ok=ok, **kwargs).stdout)


@pytest.fixture
def user(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[User]:
    """A fresh user: ``HOME`` and ``TMPDIR`` of their own, the shell's ``PATH``, nothing of this test run."""
    home, tmp, cwd = tmp_path / "home", tmp_path / "tmp", tmp_path / "work"
    for folder in (home, tmp, cwd):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_INHERITED)}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    # the seeds of a test depend only on the base seed and the test's name
    yield User(home=home, cwd=cwd, env=env, seeds=random.Random(f"{BASE_SEED}:{request.node.nodeid}"))


def trace_ids(runs: list[dict[str, Any]], **match: str) -> list[str]:
    """Trace ids of the ``runs --json`` rows whose fields have the given values."""
    return [r["trace_id"] for r in runs if all(r.get(k) == v for k, v in match.items())]
