"""The fault-injection hook (``otel_replay.faults``): what a spec arms, and what an armed point does to the
real spool and ingest. The kill actions are exercised by ``test_faults_kill.py`` and ``test_ingest.py``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import otel_replay as orp
from otel_replay import faults
from otel_replay.storage.store import Store


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    faults.disarm()
    yield
    faults.disarm()


def test_a_spec_names_points_passes_and_actions() -> None:
    assert faults.parse(" spool.append@3=tear, ingest.claimed ,") == (
        faults.Fault(point="spool.append", nth=3, action="tear"),
        faults.Fault(point="ingest.claimed", nth=1, action="kill"),
    )
    assert faults.parse("") == ()
    faults.arm("spool.seal.after_rename@2")
    assert faults.armed() == (faults.Fault(point="spool.seal.after_rename", nth=2),)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("spool.apend", "unknown fault point 'spool.apend'"),
        ("ingest.claimed=explode", "unknown action 'explode'"),
        ("ingest.claimed@0", "counts from 1"),
        ("ingest.claimed@two", "whole number"),
    ],
)
def test_a_bad_spec_is_refused_naming_what_is_wrong(spec: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        faults.arm(spec)


def test_a_point_acts_on_the_nth_pass_only() -> None:
    faults.arm("ingest.claimed@2=raise")
    faults.reached("ingest.claimed")
    faults.reached("ingest.inserted")  # another point: not counted
    with pytest.raises(faults.FaultInjected, match=r"ingest\.claimed"):
        faults.reached("ingest.claimed")
    faults.reached("ingest.claimed")  # the third pass: nothing armed for it


def test_a_failing_spool_write_never_reaches_the_agent_and_flush_says_so(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    @orp.agent("fault-point-agent")
    def agent(question: str) -> str:
        return question.upper()

    faults.arm("spool.append=raise")
    with caplog.at_level(logging.WARNING, logger="otel_replay"):
        assert agent("still answered") == "STILL ANSWERED"
        assert orp.flush() is False
    assert "fault injected at spool.append" in caplog.text
    faults.disarm()
    assert agent("recorded") == "RECORDED" and orp.flush() is True
    with Store.open(home=home) as store:
        assert [run.agent for run in store.runs()] == ["fault-point-agent"]  # the run after the fault only


def test_a_bad_spec_in_the_environment_arms_nothing_and_the_program_runs(tmp_path: Path) -> None:
    env = dict(os.environ, OTEL_REPLAY_FAULTS="spool.nowhere@1", OTEL_REPLAY_HOME=str(tmp_path / "home"))
    out = subprocess.run(
        [sys.executable, "-c", "import otel_replay.faults as f; print(f.armed())"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0 and out.stdout == "()\n", out.stderr
    assert "unknown fault point 'spool.nowhere'" in out.stderr and "no fault is armed" in out.stderr
