"""Faults: the store is unavailable (a busy lock, an unreachable ClickHouse server or Collector, a full disk).

In each case the agent keeps running (every call returns normally, nothing raises into it), memory stays
bounded, nothing already flushed is lost, and the user is told: a warning on the ``otel_replay`` logger, a
``False`` from ``otel_replay.flush()``, or one ``error:`` line from the CLI. Real processes, the real spool and
the real embedded store; the full disk is a failing writer (``os.write`` / ``os.fsync`` answer ENOSPC for files
in the spool), so the test needs no root-only mount.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fault_agents import Expected, assert_stored_exactly_once, fault_agent, spans_of

import otel_replay as orp
from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent
WAIT_S = 60  # bound on every wait; never asserted as a duration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def record(prefix: str, count: int) -> list[Expected]:
    """Run the agent ``count`` times; every call must return normally."""
    runs = []
    for i in range(count):
        tools = i % 4
        marker = f"<{prefix}-{i}>"
        out = fault_agent(marker, tools=tools)
        assert out["marker"] == marker
        runs.append(Expected(out["trace_id"], marker, spans_of(tools)))
    return runs


def memory_child(mode: str, home: Path, rounds: int, per_round: int, url: str = "") -> dict:
    """Run ``tests/fault_memory.py`` (rounds of runs in a process of its own); its JSON report."""
    result = subprocess.run(
        [sys.executable, str(TESTS_DIR / "fault_memory.py"), mode, str(home), str(rounds), str(per_round), url],
        capture_output=True,
        text=True,
        timeout=WAIT_S * 2,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    report["runs"] = [Expected(**run) for run in report["runs"]]
    return report


def assert_bounded(report: dict, *, warmup: int = 2) -> None:
    """After ``warmup`` rounds (queues filled, caches warm) memory no longer grows with what is recorded."""
    sizes = report["sizes"]
    growth = max(sizes[warmup:]) - sizes[warmup - 1]
    recorded = report["recorded_per_round"] * (len(sizes) - warmup)
    assert growth < min(1_000_000, recorded // 4), f"memory grew {growth} bytes while {recorded} were recorded: {sizes}"


# ---------------------------------------------------------------------------------------------- busy lock


HOLDER = textwrap.dedent("""
    import sys
    from otel_replay.storage.store import Store
    store = Store.open(home=sys.argv[1])
    print("holding", flush=True)
    sys.stdin.readline()
    store.close()
""")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, text=True, timeout=WAIT_S, env=env
    )


def test_busy_store_lock_agent_keeps_recording_cli_says_so_in_one_line_and_everything_is_ingested_later(home):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "holding\n", holder.stderr.read()
        runs = record("busy", 12)
        assert orp.flush(), "the agent only appends to the spool: a busy store does not concern it"

        busy = cli("runs", "--json", env=dict(os.environ, OTEL_REPLAY_LOCK_TIMEOUT="0.5"))
        assert busy.returncode == 2, busy
        assert busy.stdout == ""
        lines = busy.stderr.strip().splitlines()
        assert len(lines) == 1, busy.stderr
        assert (
            lines[0].startswith("error: the embedded store at ")
            and f" is busy: held by pid {holder.pid} " in lines[0]
            and "OTEL_REPLAY_LOCK_TIMEOUT" in lines[0]
        ), lines[0]
        with pytest.raises(orp.StoreBusyError, match=f"held by pid {holder.pid}"):
            Store.open(home=home, lock_timeout=0.2)
    finally:
        holder.communicate("\n", timeout=WAIT_S)
    assert holder.returncode == 0

    listed = cli("runs", "--json", "--limit", "1000")
    assert listed.returncode == 0, listed.stderr
    assert sorted(run["trace_id"] for run in json.loads(listed.stdout)) == sorted(run.trace_id for run in runs)
    with Store.open(home=home) as store:
        assert_stored_exactly_once(store, runs)


# ------------------------------------------------------------------------------- ClickHouse server unreachable


def test_clickhouse_server_unreachable_agent_runs_memory_flat_spans_spooled_then_stored_once(home, tmp_path):
    report = memory_child("clickhouse", home, 6, 20, f"http://127.0.0.1:{free_port()}/default")
    assert report["flushed"] == [True] * 6, "a spooled batch is delivered: flush() says so"
    assert_bounded(report)
    assert any("connection refused" in m and "spooling to" in m for m in report["warnings"]), report["warnings"]
    assert not list((home / "spool").glob("*.open"))

    runs = report["runs"]
    with Store.open(f"chdb://{tmp_path}/server-back", home=home) as store:  # the server is back: the normal ingest
        assert store.last_ingest is not None and store.last_ingest.skipped_records == 0
        assert_stored_exactly_once(store, runs)
        assert store.last_ingest.spans == sum(run.spans for run in runs)


# ------------------------------------------------------------------------------------- Collector unreachable


def test_collector_refusing_connections_agent_runs_memory_flat_user_told_and_flush_false(home):
    report = memory_child("otlp", home, 4, 20, f"http://127.0.0.1:{free_port()}/v1/traces")
    assert report["flushed"] == [False] * 4, "flush() must not claim spans reached a Collector that refused them"
    assert_bounded(report)
    told = [m for m in report["warnings"] if "otlp exporter could not export" in m]
    assert len(told) == 1, report["warnings"]  # one warning per outage, not one per batch


def test_collector_hanging_memory_bounded_by_the_queue_flush_bounded_then_recovery_is_told(home):
    # ~160 spans a round while the exporter thread waits on the Collector: the queue (OTEL_BSP_MAX_QUEUE_SIZE=512)
    # is full after the fourth round, and from then on memory stays where it is.
    report = memory_child("otlp-hang", home, 8, 25)
    sizes = report["sizes"]
    assert sizes[2] - sizes[0] > report["recorded_per_round"], "while the queue fills, memory grows"
    assert_bounded(report, warmup=4)
    assert report["flush_returned_during_outage"], "flush(300) must not wait for a Collector that never answers"
    assert report["flush_during_outage"] is False
    assert report["flush_after_outage"] is False
    assert report["flush_after_recovery"] is True
    assert any("otlp exporter could not export" in m for m in report["warnings"]), report["warnings"]
    assert any("otlp exporter works again" in m for m in report["warnings"]), report["warnings"]


# ------------------------------------------------------------------------------------------------ disk full


def disk_full_child(scenario: str, home: Path, url: str = "") -> tuple[subprocess.Popen, dict]:
    """Start ``tests/fault_disk_full.py``; returns the live child (waiting for a line on stdin) and its report."""
    child = subprocess.Popen(
        [sys.executable, str(TESTS_DIR / "fault_disk_full.py"), scenario, str(home), url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = child.stdout.readline()
    if not line:
        child.kill()
        pytest.fail(f"the agent child died: {child.communicate(timeout=WAIT_S)[1]}")
    report = json.loads(line)
    report["runs"] = {phase: [Expected(**run) for run in runs] for phase, runs in report["runs"].items()}
    return child, report


def end_child(child: subprocess.Popen) -> None:
    _, err = child.communicate("\n", timeout=WAIT_S)
    assert child.returncode == 0, err
    assert "Traceback" not in err, err


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="the failing writer finds files via /proc")


@needs_proc
def test_disk_full_agent_runs_flushed_runs_kept_recording_resumes_and_user_told(home):
    child, report = disk_full_child("spool", home)
    try:
        runs, flushed, told = report["runs"], report["flushed"], report["warnings"]
        assert flushed == {"before": True, "sealing": False, "lost": False, "after": True}, flushed
        assert report["open_after_failed_seal"] == 1, "a segment that could not be sealed stays open, to seal later"
        assert report["open_after_recovery"] == 0, "once space is back, the next flush seals it"
        assert report["dropped_spans"] == sum(run.spans for run in runs["lost"])
        assert any("could not seal" in m and "No space left on device" in m for m in told), told
        writes = [m for m in told if "could not write" in m]
        assert len(writes) == 1 and "No space left on device" in writes[0], told  # once per outage
        assert any("writing to" in m and "again" in m for m in told), told

        kept = runs["before"] + runs["sealing"] + runs["after"]
        with Store.open(home=home) as store:  # the agent is still running
            report_ = store.last_ingest
            assert report_ is not None and report_.skipped_records == 0, report_  # the short write was cut off
            counts = assert_stored_exactly_once(store, kept)
        assert not {trace_id for trace_id, _ in counts} & {run.trace_id for run in runs["lost"]}
    finally:
        end_child(child)
    with Store.open(home=home) as store:  # the agent is gone: nothing it left behind is ingested twice
        assert_stored_exactly_once(store, kept)


@needs_proc
def test_disk_full_while_clickhouse_is_down_memory_capped_and_held_batches_spooled_once_when_space_returns(
    home, tmp_path
):
    child, report = disk_full_child("clickhouse", home, f"http://127.0.0.1:{free_port()}/default")
    url = f"chdb://{tmp_path}/server-back"
    try:
        runs, flushed, told = report["runs"], report["flushed"], report["warnings"]
        assert flushed == {"before": True, "sealing": False, "held": False, "dropped": False, "after": True}, flushed
        held_spans = sum(run.spans for run in runs["held"])
        assert report["pending_rows_held"] == held_spans <= 60
        assert report["pending_rows_capped"] == held_spans, "a batch beyond max_pending_rows is dropped, not held"
        assert report["pending_rows_after"] == 0
        assert report["dropped_spans"] == sum(run.spans for run in runs["dropped"])
        assert report["open_after_recovery"] == 0
        assert any("both unavailable; holding" in m for m in told), told
        assert any("dropped" in m and "max_pending_rows" in m for m in told), told

        kept = runs["before"] + runs["sealing"] + runs["held"] + runs["after"]
        with Store.open(url, home=home) as store:  # the server is back while the agent still runs
            assert_stored_exactly_once(store, kept)
    finally:
        end_child(child)
    with Store.open(url, home=home) as store:  # the agent is gone: nothing it left behind is ingested twice
        assert_stored_exactly_once(store, kept)
