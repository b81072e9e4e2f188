"""The skip check (``tests/skip_check.py``) fails a run with a skip that ``tests/allowed_skips.py`` does not list,
with or without pytest-xdist, and lets one through that it lists. Each case is a pytest run of its own on a
small test file, with the plugin loaded by ``-p``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from allowed_skips import ALLOWED
from pytest_children import UNRELATED_PLUGINS

TESTS = Path(__file__).resolve().parent

TEST_FILE = textwrap.dedent("""
    import os

    import pytest

    def test_runs() -> None:
        assert True

    def test_skipped() -> None:
        pytest.skip(os.environ["SKIP_MESSAGE"])
""")

PASSING = "def test_runs() -> None:\n    assert True\n"


def _pytest(tmp_path: Path, source: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(source)
    if "SKIP_MODULE" in env:  # a second module, skipped whole at collection
        skip = f"import pytest\n\npytest.skip({env.pop('SKIP_MODULE')!r}, allow_module_level=True)\n"
        (tmp_path / "test_sample_skipped.py").write_text(skip)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the run's rootdir: none of the repository's settings
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "OTEL_REPLAY_NO_SKIPS", "PYTEST_ADDOPTS")}
    environ.update(PYTHONPATH=str(TESTS), **env)
    command = [sys.executable, "-m", "pytest", *UNRELATED_PLUGINS, "-p", "no:cacheprovider", "-p", "skip_check"]
    return subprocess.run(
        [*command, *args, str(tmp_path)], capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=120
    )


def test_an_unlisted_skip_fails_the_run_and_is_named(tmp_path: Path) -> None:
    out = _pytest(tmp_path, TEST_FILE, OTEL_REPLAY_NO_SKIPS="1", SKIP_MESSAGE="the database is not up")

    assert out.returncode == 1, out.stdout + out.stderr
    assert "skip check: FAILED, 1 skip(s) not on tests/allowed_skips.py" in out.stdout
    assert "test_sample.py::test_skipped: the database is not up" in out.stdout
    assert "1 passed, 1 skipped" in out.stdout


def test_ci_turns_the_check_on_and_the_switch_turns_it_off(tmp_path: Path) -> None:
    on = _pytest(tmp_path, TEST_FILE, CI="true", SKIP_MESSAGE="the database is not up")
    off = _pytest(tmp_path, TEST_FILE, CI="true", OTEL_REPLAY_NO_SKIPS="0", SKIP_MESSAGE="the database is not up")
    unset = _pytest(tmp_path, TEST_FILE, SKIP_MESSAGE="the database is not up")

    assert on.returncode == 1, on.stdout + on.stderr
    assert off.returncode == 0, off.stdout + off.stderr
    assert "skip check: off" in off.stdout
    assert unset.returncode == 0, unset.stdout + unset.stderr


def test_a_listed_skip_passes(tmp_path: Path) -> None:
    out = _pytest(tmp_path, TEST_FILE, OTEL_REPLAY_NO_SKIPS="1", SKIP_MESSAGE="needs os.fork")

    assert out.returncode == 0, out.stdout + out.stderr
    assert "skip check: passed, 1 skip(s), each on tests/allowed_skips.py" in out.stdout


def test_a_module_skipped_on_an_xdist_worker_fails_the_run(tmp_path: Path) -> None:
    message = "a module skipped at collection, for no listed reason"
    out = _pytest(tmp_path, PASSING, "-n", "1", OTEL_REPLAY_NO_SKIPS="1", SKIP_MODULE=message)

    assert out.returncode == 1, out.stdout + out.stderr
    assert f"test_sample_skipped.py: {message}" in out.stdout
    assert "1 passed, 1 skipped" in out.stdout


def test_a_failing_run_keeps_its_exit_code(tmp_path: Path) -> None:
    source = TEST_FILE.replace("assert True", "assert False")
    out = _pytest(tmp_path, source, "-p", "no:xdist", OTEL_REPLAY_NO_SKIPS="1", SKIP_MESSAGE="not listed")

    assert out.returncode == 1, out.stdout + out.stderr
    assert "skip check: FAILED" in out.stdout


@pytest.mark.parametrize(("pattern", "reason"), ALLOWED)
def test_each_allowed_skip_says_why(pattern: str, reason: str) -> None:
    assert pattern.startswith("^") and len(reason.split()) >= 8, (pattern, reason)
