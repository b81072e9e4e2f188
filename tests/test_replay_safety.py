"""The replay firewall and the recorder under the ways they could slip: sampled-out spans, failures inside the
replay machinery, tools run from other threads, undecorated tools, object arguments, secrets in odd places."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import fork_server
import pytest
import safety_agents as agents

import otel_replay as orp
from otel_replay.replay import session as replay_session
from otel_replay.replay.safety.audit import audit
from otel_replay.replay.scopes import replay_tool

TESTS = Path(__file__).parent


@pytest.fixture
def ledger(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("SAFETY_LEDGER", str(path))
    return path


def record(func: Any, *args: Any) -> str:
    """Run an agent once and return its trace id."""
    try:
        result = func(*args)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    except Exception:  # noqa: BLE001 - some agents fail on purpose
        pass
    orp.flush()
    with orp.Store.open() as store:
        return store.runs(limit=1)[0].trace_id


def test_a_sampled_out_replay_still_refuses_an_unapproved_high_tool(ledger: Path, home: Path) -> None:
    trace_id = record(agents.payer, 5)
    assert agents.executions() == ["wire_money 5"]
    env = {
        **os.environ,
        "OTEL_REPLAY_HOME": str(home),
        "OTEL_TRACES_SAMPLER": "always_off",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    out = fork_server.run(
        [
            sys.executable,
            "-m",
            "otel_replay.cli",
            "replay",
            trace_id,
            "--mode",
            "live",
            "--reason",
            "sampler test",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert json.loads(out.stdout)["outcome"] == "refused"
    assert agents.executions() == ["wire_money 5"]


def test_a_failure_inside_the_replay_machinery_stops_the_call_instead_of_running_it(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_id = record(agents.payer, 6)

    def broken(self: Any, recorded: Any) -> Any:
        raise OverflowError("cannot rebuild the recorded value")

    monkeypatch.setattr(replay_session.ReplaySession, "_answer", broken)
    result = orp.replay(trace_id, mode="mock")
    assert result.outcome == "diverged"
    assert agents.executions() == ["wire_money 6"]


def test_a_high_tool_run_from_a_worker_thread_is_never_run_again_by_a_replay(ledger: Path) -> None:
    """The pool's work item carries the run while recording, so the high tool is a step of it; a replay
    answers it from the recording (the work item carries the replay) instead of running it."""
    trace_id = record(agents.threaded_payer, 7)
    assert agents.executions() == ["wire_money 7"]
    for mode in ("mock", "deterministic"):
        result = orp.replay(trace_id, mode=mode)
        assert result.outcome == "matched", result.divergences
        assert [s.name for s in result.replay.steps] == ["lookup", "wire_money"]
    assert agents.executions() == ["wire_money 7"]


def test_replay_tool_refuses_a_tool_whose_recorded_function_is_not_the_decorated_one(ledger: Path) -> None:
    trace_id = record(agents.alias_payer, 8)
    with pytest.raises(orp.ReplayRefused, match=r"not an @otel_replay\.tool function"):
        replay_tool(trace_id, 0, mode="mock")
    assert agents.executions() == ["raw_wire 8"]


def test_replay_tool_awaits_an_async_tool(ledger: Path) -> None:
    trace_id = record(agents.async_payer, 9)
    mocked = replay_tool(trace_id, 0, mode="mock")
    assert mocked.outcome == "matched" and mocked.result == 9
    live = replay_tool(trace_id, 0, mode="live", approve=True, reason="check the payment API")
    assert live.outcome == "matched" and live.result == 9
    assert agents.executions() == ["async_wire 9", "async_wire 9"]


def test_an_async_agent_replays_from_inside_a_running_event_loop(ledger: Path) -> None:
    trace_id = record(agents.async_payer, 10)

    async def from_a_loop() -> orp.ReplayResult:
        return orp.replay(trace_id, mode="mock")

    result = asyncio.run(from_a_loop())
    assert result.outcome == "matched" and result.replay_trace_id is not None
    assert agents.executions() == ["async_wire 10"]


def test_object_arguments_and_huge_ints_hash_the_same_in_a_replay(ledger: Path) -> None:
    trace_id = record(agents.object_args)
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "matched", result.divergences


def test_values_come_back_in_the_order_they_were_drawn(ledger: Path) -> None:
    trace_id = record(agents.drawer)
    with orp.Store.open() as store:
        original = store.load_run(trace_id).snapshots["output"]["answer"]
    result = orp.replay(trace_id, mode="mock")
    assert result.outcome == "matched", result.divergences
    assert result.replay is not None and result.replay.snapshots["output"]["answer"] == original


def test_long_runs_keep_every_snapshot(ledger: Path) -> None:
    trace_id = record(agents.stateful, 300)
    with orp.Store.open() as store:
        run = store.load_run(trace_id)
    assert [s.payload["task_state"]["i"] for s in run.timeline if s.kind == "state"] == list(range(300))
    assert "config" not in run.snapshots or run.snapshots["config"]
    assert {"input", "output"} <= set(run.snapshots)


SECRET_PW = "hunter2-mixed-" + "Qz7Lp0Wm"
SECRET_TOKEN = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"


@orp.tool("odd_secrets", risk="read")
def odd_secrets(mixed: dict, blob: bytes) -> str:
    return "ok"


@orp.agent("odd-secret-agent")
def odd_secret_agent() -> str:
    return odd_secrets({1: "one", "password": SECRET_PW}, f"Authorization: Bearer {SECRET_TOKEN}".encode())


def test_secrets_in_mixed_key_dicts_bytes_and_replay_reasons_are_redacted(home: Path) -> None:
    odd_secret_agent()
    orp.flush()
    with orp.Store.open() as store:
        (summary,) = store.runs(limit=1)
        orp.replay(summary.trace_id, mode="mock", reason=f"check token {SECRET_TOKEN}", actor="ana", store=store)
        rows = store.client.query("SELECT * FROM otel_traces").result_rows
        entries = [e.to_dict() for e in audit(store=store)]
    dump = repr(rows) + json.dumps(entries)
    for secret in (SECRET_PW, SECRET_TOKEN):
        assert secret not in dump
    spool = b"".join(p.read_bytes() for p in (home / "spool").rglob("*") if p.is_file())
    assert SECRET_TOKEN.encode() not in spool and SECRET_PW.encode() not in spool
