"""Shared fixtures and the suite-wide Hypothesis profile.

chDB runs one embedded ClickHouse engine per process and one on-disk path at a time: every test that opens a
store must close it (use the ``store`` fixture or ``with Store.open(...)``) before another path is opened.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from otel_replay import configure

# Property tests draw the same examples on every run and every machine (a random seed must not decide whether
# the suite passes), keep no example database between runs, and have no wall-clock deadline per example.
settings.register_profile("otel-replay", derandomize=True, database=None, deadline=None, print_blob=False)
settings.load_profile("otel-replay")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh OTEL_REPLAY_HOME for one test, with no store URL inherited from the environment."""
    path = tmp_path / "otel-replay-home"
    monkeypatch.setenv("OTEL_REPLAY_HOME", str(path))
    monkeypatch.delenv("OTEL_REPLAY_STORE", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    # Start from the spool exporter in this home, as a fresh process would (an earlier test may have
    # configured another home or exporter in this process).
    configure(home=path, exporter="spool")
    return path
