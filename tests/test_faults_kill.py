"""Faults: a process SIGKILLed while it records, while it flushes, and while the store ingests as it records.

Real processes, the real spool and the real embedded store. A child agent records runs in a loop and, after each
``otel_replay.flush()`` returns, appends the runs it flushed to a side file (one write, fsync) and says so on
stdout. It dies at a named fault point (``otel_replay.faults``, armed through ``OTEL_REPLAY_FAULTS`` or once it
has flushed three times), or the parent kills it right after a flush it reported: no sleeps, no deadlines. The
parent then opens the store (which ingests) and checks: every span of every flushed run is stored exactly once,
and whatever the kill left half-written is skipped and reported by the ingest, never a crash.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fault_agents import assert_stored_exactly_once, read_side_file

from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent
START_TIMEOUT_S = 60  # generous bounds on waits, never asserted as durations

AGENT = textwrap.dedent("""
    import os, random, sys
    sys.path.insert(0, {tests_dir!r})
    home, side, seed, arm_after, credits = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    import otel_replay as orp
    from otel_replay import faults
    from fault_agents import Expected, append_line, fault_agent, spans_of

    orp.configure(home=home, exporter="spool")
    rng = random.Random(seed)
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    print("ready", flush=True)
    run = flushes = 0
    while True:
        if credits == "credits" and not sys.stdin.read(1):  # one batch per byte the parent sends; EOF: stop
            sys.exit(0)
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
        print("flushed", flush=True)
        if flushes == 3 and arm_after != "-":  # the next time the process passes the point, it dies there
            faults.arm(arm_after)
""")


def start_agent(
    tmp_path: Path,
    home: Path,
    side: Path,
    seed: int,
    *,
    faults: str = "",
    arm_after_three: str = "-",
    credits: bool = False,  # noqa: A002 - the child's own flag name
) -> subprocess.Popen:
    """Start the agent child. ``faults``: armed from the start (``OTEL_REPLAY_FAULTS``); ``arm_after_three``:
    armed once the child has flushed three times; ``credits``: the child records one batch per byte written to
    its stdin (else flat out). It prints ``flushed`` after each flush it listed in the side file."""
    script = tmp_path / "fault_agent_child.py"
    if not script.exists():
        script.write_text(AGENT.format(tests_dir=str(TESTS_DIR)))
    env = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="20", OTEL_REPLAY_FAULTS=faults)  # the exporter thread writes too
    child = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(home),
            str(side),
            str(seed),
            arm_after_three,
            "credits" if credits else "flat-out",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    line = child.stdout.readline()  # blocks until the child is recording (or died)
    assert line == b"ready\n", (line, child.stderr.read() if child.stderr else "")
    return child


def wait_for_flushes(child: subprocess.Popen, count: int) -> None:
    """Block until the child has reported ``count`` more flushes (each one already in the side file)."""
    assert child.stdout is not None
    for _ in range(count):
        line = child.stdout.readline()
        assert line == b"flushed\n", (line, child.stderr.read() if child.stderr else "")


def grant(child: subprocess.Popen, batches: int) -> None:
    """Let a child started with ``credits=True`` record ``batches`` more batches."""
    assert child.stdin is not None
    child.stdin.write(b"x" * batches)
    child.stdin.flush()


def wait_killed(child: subprocess.Popen) -> None:
    """The child died of SIGKILL (its own fault point, or :func:`kill`)."""
    child.wait(timeout=START_TIMEOUT_S)
    assert child.returncode == -signal.SIGKILL, (child.returncode, child.stderr.read() if child.stderr else "")
    for stream in (child.stdin, child.stdout, child.stderr):
        if stream is not None:
            stream.close()


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    wait_killed(child)


def test_sigkill_at_seeded_points_while_recording_and_flushing_loses_no_flushed_span(home, tmp_path):
    """Six agents die in turn: three at a fault point of the spool chosen by a seeded draw (a record write, a
    torn record write, or either side of a seal's rename, the n-th time it is passed), three killed by this test
    right after they reported a flush, wherever they are then. Some kills pile up in the spool before an ingest."""
    rng = random.Random(20260515)
    points = ["spool.append=kill", "spool.append=tear", "spool.seal.before_rename=kill", "spool.seal.after_rename=kill"]
    side = tmp_path / "flushed.jsonl"
    for iteration in range(6):
        if iteration % 2:
            child = start_agent(tmp_path, home, side, seed=iteration)
            wait_for_flushes(child, 1 + rng.randint(0, 2))  # this child flushed at least once
            kill(child)
        else:
            point, action = rng.choice(points).split("=")
            child = start_agent(tmp_path, home, side, seed=iteration, faults=f"{point}@{rng.randint(1, 6)}={action}")
            wait_killed(child)
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


KILL_POINTS = {
    "mid-write": "spool.append=tear",  # a record half on disk: the kill lands inside write()
    "before-rename": "spool.seal.before_rename=kill",  # sealing: fsynced, still .open
    "after-rename": "spool.seal.after_rename=kill",
}  # sealing: renamed to .seg, folder not fsynced yet


@pytest.mark.parametrize("kill_at", list(KILL_POINTS))
def test_sigkill_inside_a_flush_keeps_every_earlier_flush_and_reports_the_torn_record(home, tmp_path, kill_at):
    side = tmp_path / "flushed.jsonl"
    child = start_agent(tmp_path, home, side, seed=100, arm_after_three=KILL_POINTS[kill_at])
    wait_killed(child)  # after three flushes the child kills itself at the chosen point
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
    child = start_agent(tmp_path, home, side, seed=300, arm_after_three=KILL_POINTS["mid-write"])
    wait_killed(child)
    listed = subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", "runs", "--json", "--limit", "1000"],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
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
    agent = start_agent(tmp_path, home, side, seed=200, credits=True)
    interrupted = 0
    try:
        grant(agent, 4)
        # Each ingest dies at one named point (the n-th time it passes there) with at least four sealed segments
        # (15 rows or more) to ingest, while the agent records and flushes four more batches.
        for point, nth in [
            ("claimed", 1),
            ("inserted_chunk", rng.randint(1, 3)),
            ("inserted", 1),
            ("deleted_one", rng.randint(1, 3)),
            ("inserted_chunk", rng.randint(1, 3)),
        ]:
            wait_for_flushes(agent, 4)
            grant(agent, 4)
            env = dict(os.environ, OTEL_REPLAY_FAULTS=f"ingest.{point}@{nth}=kill")
            result = subprocess.run(
                [sys.executable, str(INGESTER), str(home), "5"],
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                env=env,
                check=False,
            )
            assert result.returncode in (0, -signal.SIGKILL), result.stderr
            if result.returncode:
                interrupted += 1
                assert list((home / "spool").glob("*.ingesting")), "the kill should have interrupted an ingest"
        wait_for_flushes(agent, 4)
    finally:
        kill(agent)
    assert interrupted == 5, "every ingest had enough to do to reach its point"
    flushed = read_side_file(side)
    with Store.open(home=home) as store:
        assert store.last_ingest is not None
        assert_stored_exactly_once(store, flushed)
    assert not list((home / "spool").glob("*.ingesting"))
