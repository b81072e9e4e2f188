"""The audit journal of a lab's replays: a lab that makes real calls writes one ``lab`` record listing its cohort
before its first replay, and its replays rely on it (no ``started`` / ``finished`` record each; every replay
still carries the lab id, actor and reason on its root span). A replay outside a lab, or one whose policy names a
lab the journal does not cover (another id, a run outside the cohort, a live replay), journals itself as before.

One cohort per module: three runs of ``lab_agents.counter_agent`` (its tool ``read_number`` is a read tool, so
running it live has no effect outside the process).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lab_agents
import pytest
from cli_in_process import run_cli

import otel_replay as orp
from otel_replay import semconv
from otel_replay.replay import journal
from otel_replay.replay.engine import replay
from otel_replay.replay.policy import ReplayPolicy

TESTS_DIR = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("lab-journal") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        mp.delenv(lab_agents.INTERRUPT_ENV, raising=False)
        orp.configure(home=home, exporter="spool")
        for n in range(3):
            lab_agents.counter_agent(n)
        orp.flush()
        with orp.Store.open() as store:
            counter = [r.trace_id for r in store.runs(kind="original", limit=100) if r.agent == "counter-agent"]
        assert len(counter) == 3
        yield {"home": home, "counter": counter}


def _env(world: dict[str, Any]) -> dict[str, str]:
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        "OTEL_REPLAY_TRUSTED_MODULES": "lab_agents",
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG"):
        env.pop(name, None)
    return env


def _records_since(world: dict[str, Any], before: int) -> list[dict[str, Any]]:
    return journal.read(world["home"])[before:]


def test_a_lab_that_journaled_is_the_one_record_of_its_replays(world: dict[str, Any]) -> None:
    before = len(journal.read(world["home"]))

    result = orp.lab(agent="counter-agent", tool_live=["read_number"], reason="tool check", workers=1)

    records = _records_since(world, before)
    assert [r["record"] for r in records] == ["lab"]  # no started / finished record per replay
    assert records[0]["cohort"] == result.cohort and journal.record_valid(records[0])
    assert {p.outcome for p in result.pairs} == {"matched"}
    with orp.Store.open() as store:  # each replay still says which lab made it, with a verifiable root
        for pair in result.pairs:
            assert pair.replay_trace_id is not None
            root = store.load_run(pair.replay_trace_id).attributes
            assert root[semconv.REPLAY_LAB_ID] == result.lab_id
            assert root[semconv.REPLAY_REASON] == "tool check"


def test_a_lab_from_worker_processes_writes_one_record(world: dict[str, Any]) -> None:
    before = len(journal.read(world["home"]))

    out = run_cli(
        ["lab", "--agent", "counter-agent", "--tool-live", "read_number", "--reason", "pool", "--workers", "2"],
        env=_env(world),
    )

    assert out.returncode == 0, out.stderr
    assert [r["record"] for r in _records_since(world, before)] == ["lab"]


def test_a_replay_outside_a_lab_still_journals_itself(world: dict[str, Any]) -> None:
    trace_id = world["counter"][0]
    before = len(journal.read(world["home"]))

    replay(trace_id, mode="live", reason="verify the fix")
    replay(trace_id, mode="deterministic", reason="tools live", policy=ReplayPolicy(tools_live=("read_number",)))

    kinds = [(r["record"], r.get("mode")) for r in _records_since(world, before)]
    assert kinds == [("started", "live"), ("finished", None), ("started", "deterministic"), ("finished", None)]


def test_a_policy_naming_a_lab_the_journal_does_not_cover_still_journals(world: dict[str, Any]) -> None:
    lab = orp.lab(trace_ids=world["counter"][:1], tool_live=["read_number"], reason="one run", workers=1)
    before = len(journal.read(world["home"]))

    # a lab id no record holds (forged, or a lab journaled in another home)
    replay(
        world["counter"][0],
        mode="deterministic",
        reason="x",
        policy=ReplayPolicy(lab_id="f" * 32, tools_live=("read_number",)),
    )
    # a real lab's id, but a run outside its cohort
    replay(
        world["counter"][1],
        mode="deterministic",
        reason="x",
        policy=ReplayPolicy(lab_id=lab.lab_id, tools_live=("read_number",)),
    )
    # a real lab's id and run, but a live replay (a lab never makes one)
    replay(world["counter"][0], mode="live", reason="x", policy=ReplayPolicy(lab_id=lab.lab_id))

    started = [r for r in _records_since(world, before) if r["record"] == "started"]
    assert [r["original_trace_id"] for r in started] == [world["counter"][0], world["counter"][1], world["counter"][0]]
