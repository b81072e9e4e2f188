"""A pytest plugin that fails a run in which a test was skipped for a reason not on the allow-list.

On when ``OTEL_REPLAY_NO_SKIPS=1``, or when ``CI`` is set (to anything but ``0``/``false``) and
``OTEL_REPLAY_NO_SKIPS`` is not ``0``. Then every skip, of a test or of a whole module at collection, is matched
against :data:`allowed_skips.ALLOWED`; one that matches no entry makes the run exit 1, and the terminal summary
lists it with its test id. A checked run's summary has a ``skip check:`` line saying how it went.

Under pytest-xdist the controller decides: the workers send it their test reports and their skipped collection
reports, and it sees them through the same hooks. ``tests/conftest.py`` loads this plugin; the test of the plugin
loads it with ``-p skip_check``.
"""

from __future__ import annotations

import os
import re

import pytest
from allowed_skips import ALLOWED

SWITCH = "OTEL_REPLAY_NO_SKIPS"
LIST = "tests/allowed_skips.py"


def checking() -> bool:
    """Whether this run fails on a skip that is not allowed (see the module's docstring)."""
    switch = os.environ.get(SWITCH, "").strip()
    if switch:
        return switch != "0"
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The message the skip was given (pytest keeps it as ``Skipped: <message>``)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def allowed(message: str) -> bool:
    """Whether a skip with this message is on the allow-list."""
    return any(re.search(pattern, message) for pattern, _ in ALLOWED)


class SkipCheck:
    """The skips of one run, as the controller (or a run without workers) sees them."""

    def __init__(self) -> None:
        self.on = checking()
        self.allowed: list[tuple[str, str]] = []
        self.refused: list[tuple[str, str]] = []

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            message = _message(report)
            (self.allowed if allowed(message) else self.refused).append((report.nodeid, message))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.on and self.refused and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        if not self.on:
            if self.refused:
                write(f"skip check: off ({SWITCH}=1 or CI turns it on); {len(self.refused)} skip(s) not on {LIST}")
            return
        if not self.refused:
            write(f"skip check: passed, {len(self.allowed)} skip(s), each on {LIST}", green=True, bold=True)
            return
        write(
            f"skip check: FAILED, {len(self.refused)} skip(s) not on {LIST} (so the run fails; {SWITCH}=0 turns "
            "the check off):",
            red=True,
            bold=True,
        )
        for nodeid, message in self.refused:
            write(f"  {nodeid}: {message}")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker sends its reports to the controller, which checks
        config.pluginmanager.register(SkipCheck(), "otel-replay-skip-check")
