"""Faults: a process SIGKILLed while it records, while it flushes, and while the store ingests as it records.

Real processes, the real spool and the real embedded store. A child agent records runs in a loop and, after each
``otel_replay.flush()`` returns, appends the runs it flushed to a side file (one write, fsync). The parent kills
it, then opens the store (which ingests) and checks: every span of every flushed run is stored exactly once, and
whatever the kill left half-written is skipped and reported by the ingest, never a crash.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fault_agents import assert_stored_exactly_once, read_side_file

from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent
START_TIMEOUT_S = 60  # generous bounds on waits, never asserted as durations

AGENT = textwrap.dedent("""
    import os, random, signal, sys
    sys.path.insert(0, {tests_dir!r})
    home, side, seed, kill_at, pace = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    import time
    import otel_replay as orp
    from otel_replay.exporting import spool
    from fault_agents import Expected, append_line, fault_agent, spans_of

    flushes = 0

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if kill_at == "mid-write":  # a record half on disk: the kill lands inside write()
        real_write_all = spool._write_all
        def _write_all(fd, data):
            if flushes >= 3 and len(data) > len(spool.SEGMENT_MAGIC):
                os.write(fd, data[:len(data) // 2])
                die()
            real_write_all(fd, data)
        spool._write_all = _write_all
    elif kill_at == "before-rename":  # sealing: fsynced, still .open
        real_replace = os.replace
        def replace(src, dst, *args, **kwargs):
            if flushes >= 3 and str(src).endswith(spool.OPEN_SUFFIX):
                die()
            return real_replace(src, dst, *args, **kwargs)
        os.replace = replace
    elif kill_at == "after-rename":  # sealing: renamed to .seg, folder not fsynced yet
        real_fsync_dir = spool.fsync_dir
        def fsync_dir(directory, **kwargs):
            if flushes >= 3:
                die()
            real_fsync_dir(directory, **kwargs)
        spool.fsync_dir = fsync_dir

    orp.configure(home=home, exporter="spool")
    rng = random.Random(seed)
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    print("ready", flush=True)
    run = 0
    while True:
        batch = []
        for _ in range(rng.randint(1, 4)):
            tools = rng.randint(0, 6)
            marker = f"<k{{seed}}-{{run}}>"
            out = fault_agent(marker, tools=tools, pad="p" * rng.randint(0, 3000))
            batch.append(Expected(out["trace_id"], marker, spans_of(tools)))
            run += 1
        if not orp.flush():
            print("flush returned False", file=sys.stderr, flush=True)
            sys.exit(3)
        append_line(fd, batch)
        flushes += 1
        time.sleep(pace)
""")


def start_agent(tmp_path: Path, home: Path, side: Path, seed: int, kill_at: str = "random",
                pace: float = 0.0) -> subprocess.Popen:
    """Start the agent child; ``pace``: seconds it sleeps after each flush (0: records flat out)."""
    script = tmp_path / "fault_agent_child.py"
    if not script.exists():
        script.write_text(AGENT.format(tests_dir=str(TESTS_DIR)))
    env = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="20")  # the exporter thread also writes while runs record
    child = subprocess.Popen([sys.executable, str(script), str(home), str(side), str(seed), kill_at, str(pace)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    line = child.stdout.readline()  # blocks until the child is recording (or died)
    assert line == "ready\n", (line, child.stderr.read() if child.stderr else "")
    return child


def wait_for_flushes(side: Path, count: int, child: subprocess.Popen) -> None:
    """Bounded wait until the side file lists at least ``count`` flushed runs."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while len(read_side_file(side)) < count:
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        assert time.monotonic() < deadline, "the agent did not flush in time"
        time.sleep(0.01)


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=START_TIMEOUT_S)
    assert child.returncode == -signal.SIGKILL, (child.returncode, child.stderr.read() if child.stderr else "")
    child.stdout.close()
    child.stderr.close()


def test_sigkill_at_random_moments_while_recording_and_flushing_loses_no_flushed_span(home, tmp_path):
    rng = random.Random(20260515)
    side = tmp_path / "flushed.jsonl"
    for iteration in range(6):
        child = start_agent(tmp_path, home, side, seed=iteration)
        if iteration % 2:
            wait_for_flushes(side, len(read_side_file(side)) + 1, child)  # this child flushed at least once
        time.sleep(rng.uniform(0.0, 0.6))
        kill(child)
        flushed = read_side_file(side)
        if iteration in (2, 5):  # ingest after some kills, let others pile up in the spool
            with Store.open(home=home) as store:
                report = store.last_ingest
                assert report is not None and not report.busy
                assert len(report.problems) >= report.skipped_records
                assert_stored_exactly_once(store, flushed)
    assert len(flushed) >= 3, "the agents should have flushed some runs before being killed"
    with Store.open(home=home) as store:
        assert store.last_ingest is not None and store.last_ingest.spans == 0  # nothing was left over
        assert_stored_exactly_once(store, read_side_file(side))
    assert not [p for p in (home / "spool").iterdir() if not p.name.startswith(".")], "every segment was ingested"


@pytest.mark.parametrize("kill_at", ["mid-write", "before-rename", "after-rename"])
def test_sigkill_inside_a_flush_keeps_every_earlier_flush_and_reports_the_torn_record(home, tmp_path, kill_at):
    side = tmp_path / "flushed.jsonl"
    child = start_agent(tmp_path, home, side, seed=100, kill_at=kill_at)
    child.wait(timeout=START_TIMEOUT_S)  # after three flushes the child kills itself at the chosen point
    assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""
    child.stdout.close()
    child.stderr.close()
    flushed = read_side_file(side)
    assert len(flushed) >= 3
    open_segments = list((home / "spool").glob("*.open"))
    if kill_at in ("mid-write", "before-rename"):
        assert open_segments, "the killed flush should have left its segment open"
    with Store.open(home=home) as store:
        report = store.last_ingest
        assert report is not None
        if kill_at == "mid-write":
            assert report.skipped_records == 1, report
            assert any("torn record" in problem for problem in report.problems), report.problems
        else:
            assert report.skipped_records == 0, report
        assert report.adopted_segments == len(open_segments)
        assert_stored_exactly_once(store, flushed)
    assert not list((home / "spool").glob("*.open"))


def test_after_a_kill_mid_write_the_cli_lists_every_flushed_run_and_reports_the_torn_record(home, tmp_path):
    side = tmp_path / "flushed.jsonl"
    child = start_agent(tmp_path, home, side, seed=300, kill_at="mid-write")
    child.wait(timeout=START_TIMEOUT_S)
    assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""
    child.stdout.close()
    child.stderr.close()
    listed = subprocess.run([sys.executable, "-m", "otel_replay.cli", "runs", "--json", "--limit", "1000"],
                            capture_output=True, text=True, timeout=START_TIMEOUT_S)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    (problem,) = listed.stderr.strip().splitlines()  # the user is told, in one line
    assert "torn record" in problem, problem
    flushed = read_side_file(side)
    assert {run.trace_id for run in flushed} <= {run["trace_id"] for run in json.loads(listed.stdout)}
    with Store.open(home=home) as store:
        assert store.last_ingest is not None and store.last_ingest.spans == 0
        assert_stored_exactly_once(store, flushed)


INGESTER = Path(__file__).resolve().parent / "ingest_killer.py"


def test_sigkill_of_ingests_while_an_agent_keeps_recording_stores_each_flushed_span_once(home, tmp_path):
    rng = random.Random(7)
    side = tmp_path / "flushed.jsonl"
    agent = start_agent(tmp_path, home, side, seed=200, pace=0.1)
    interrupted = 0
    try:
        # Each ingest dies at one point (the n-th time it passes there); the agent appends all along.
        for point, nth in [("claimed", 1), ("inserted_chunk", rng.randint(1, 3)), ("inserted", 1),
                           ("deleted_one", rng.randint(1, 3)), ("inserted_chunk", rng.randint(1, 3))]:
            wait_for_flushes(side, len(read_side_file(side)) + 1, agent)
            result = subprocess.run([sys.executable, str(INGESTER), str(home), point, str(nth), "50"],
                                    capture_output=True, text=True, timeout=START_TIMEOUT_S)
            assert result.returncode in (0, -signal.SIGKILL), result.stderr
            if result.returncode:
                interrupted += 1
                assert list((home / "spool").glob("*.ingesting")), "the kill should have interrupted an ingest"
    finally:
        kill(agent)
    assert interrupted >= 3, "most ingests should have been killed part-way"
    flushed = read_side_file(side)
    with Store.open(home=home) as store:
        assert store.last_ingest is not None
        assert_stored_exactly_once(store, flushed)
    assert not list((home / "spool").glob("*.ingesting"))
