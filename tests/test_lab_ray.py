"""``otel-replay lab --executor ray``: the same worker function as Ray tasks, the same report as local workers.

Skipped when Ray is not installed (it is the optional extra ``ray``, not part of the ``test`` extra: see
docs/lab.md, "Ray in the tests").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lab_agents
import pytest
import ray  # noqa: F401 - a package of the [test] extra (the lab runs on it): missing, the module fails

import otel_replay as orp

TESTS_DIR = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The module's home with four recorded runs. Afterwards the test process's environment is put back as it
    was, whatever a failing test left in it: a variable that differs from the fork server's environment (as
    ``PYTHONBREAKPOINT``, which ``ray.init()`` sets) makes every later CLI or agent command of this process run as
    a fresh interpreter (``tests/fork_server.py``)."""
    before = dict(os.environ)
    home = tmp_path_factory.mktemp("lab-ray") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "RAY_ADDRESS", "OTEL_EXPORTER_OTLP_ENDPOINT"):
            mp.delenv(name, raising=False)
        mp.delenv(lab_agents.INTERRUPT_ENV, raising=False)
        orp.configure(home=home, exporter="spool")
        for n in range(4):
            lab_agents.counter_agent(n)
        orp.flush()
        yield {"home": home}
    os.environ.clear()
    os.environ.update(before)


def _compared(result: orp.LabResult) -> dict[str, tuple[Any, ...]]:
    return {p.original_trace_id: (p.outcome, p.output_hash, p.scores.get("output_equal")) for p in result.pairs}


def test_a_ray_lab_reports_what_local_workers_report(world: dict[str, Any]) -> None:
    local = orp.lab(agent="counter-agent", workers=2)
    environment = dict(os.environ)
    on_ray = orp.lab(agent="counter-agent", workers=2, executor="ray")

    # the local Ray the lab started is gone, and so is what it set in the program's environment (ray.init sets
    # PYTHONBREAKPOINT to its debugger hook, which later breakpoint() calls and child processes would get)
    assert dict(os.environ) == environment

    assert on_ray.cohort == local.cohort
    assert _compared(on_ray) == _compared(local)
    assert on_ray.summary["totals"] == local.summary["totals"]
    with orp.Store.open() as store:  # the Ray tasks' replays went through the spool into the store
        listed = store.runs(lab=on_ray.lab_id, limit=100)
    assert sorted(r.trace_id for r in listed) == sorted(p.replay_trace_id for p in on_ray.pairs)


def test_ctrl_c_under_ray_keeps_what_finished_writes_the_lab_span_and_exits_130(world: dict[str, Any]) -> None:
    from otel_replay import semconv
    from otel_replay.replay.safety import journal

    with orp.Store.open() as store:
        order = [r.trace_id for r in store.runs(agent="counter-agent", kind="original", limit=100)]
        inputs = {t: store.load_run(t).snapshots["input"]["args"][0] for t in order}
    stopped = order[2]  # one Ray CPU: the runs before it in the cohort's order usually finish before it
    before = len(journal.read(world["home"]))
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(world["home"]),
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p),
        "OTEL_REPLAY_TRUSTED_MODULES": "lab_agents",
        lab_agents.INTERRUPT_ENV: str(inputs[stopped]),  # the stand-in for Ctrl-C while that run replays
    }
    for name in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG", "RAY_ADDRESS"):
        env.pop(name, None)
    args = ["--agent", "counter-agent", "--executor", "ray", "--workers", "1", "--json"]
    out = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "lab", *args, "--tool-live", "read_number", "--reason", "ray stop"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=world["home"].parent,
    )

    assert out.returncode == 130, out.stderr
    assert "Traceback" not in out.stderr
    document = json.loads(out.stdout)
    assert document["interrupted"] is True and document["cohort"] == order
    kept = [r["original_trace_id"] for r in document["runs"]]
    assert stopped not in kept and set(kept) <= set(order)
    assert {r["outcome"] for r in document["runs"]} == {"matched"}
    with orp.Store.open() as store:  # the finished replays reached the store, and the lab span with them
        listed = {r.trace_id for r in store.runs(lab=document["lab_id"], limit=100)}
        spans = store.client.query(
            f"SELECT SpanAttributes FROM {store.traces_table} WHERE SpanName = {{name:String}} "
            "AND SpanAttributes[{key:String}] = {lab:String}",
            parameters={"name": semconv.LAB_SPAN_NAME, "key": semconv.LAB_ID, "lab": document["lab_id"]},
        ).result_rows
    assert {r["replay_trace_id"] for r in document["runs"]} <= listed
    (span,) = [dict(row[0]) for row in spans]
    assert span[semconv.LAB_INTERRUPTED] == "true" and span[semconv.LAB_RUNS] == str(len(kept))
    records = journal.read(world["home"])[before:]
    assert records[0]["record"] == "lab" and records[0]["lab_id"] == document["lab_id"]  # before any replay
    assert [r["record"] for r in records].count("lab") == 1
    journaled = {r["original_trace_id"] for r in records if r["record"] == "started"}
    assert set(kept) <= journaled <= set(order)  # and each replay that ran tools live journaled itself
