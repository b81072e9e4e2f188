"""Faults: 16 threads and 16 asyncio tasks record runs at once while ``otel-replay`` CLIs read the same store.

The agents (in this process) append to the spool and flush often; two reader loops, each a stream of separate
``otel-replay runs --json`` / ``otel-replay show --json`` processes, open the store (which ingests the spool)
over and over, one of them with a short lock timeout so that it meets the other holding the store. A reader
either succeeds or prints exactly one ``error:`` line saying the store is busy and exits 2: never a traceback,
never a half-shown run. Afterwards every run is in the store exactly once, with exactly its spans, and every
step carries only its own run's marker (no cross-talk between threads or tasks).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections import Counter

from fault_agents import MARKER, Expected, assert_stored_exactly_once, fault_agent, fault_agent_async, spans_of

import otel_replay as orp
from otel_replay.storage.store import Store

THREADS = 16
TASKS = 16
RUNS_EACH = 4
WAIT_S = 120  # bound on every wait; never asserted as a duration


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_replay.cli", *args], capture_output=True, text=True, timeout=WAIT_S, env=env
    )


class Progress:
    """How many reader rounds have finished; agents wait on it so that their runs span several reads."""

    def __init__(self) -> None:
        self.rounds = 0
        self.changed = threading.Condition()

    def advance(self) -> None:
        with self.changed:
            self.rounds += 1
            self.changed.notify_all()

    def wait_for(self, rounds: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.rounds >= rounds, WAIT_S), "the readers stopped"


def reader(stop: threading.Event, results: list, lock_timeout: str, progress: Progress) -> None:
    """List runs and show one of them, again and again, until ``stop`` (at least twice)."""
    env = dict(os.environ, OTEL_REPLAY_LOCK_TIMEOUT=lock_timeout)
    rounds = 0
    try:
        while not stop.is_set() or rounds < 2:
            rounds += 1
            listed = cli("runs", "--json", "--limit", "1000", env=env)
            results.append(("runs", listed))
            if listed.returncode == 0 and json.loads(listed.stdout):
                summaries = json.loads(listed.stdout)
                trace_id = summaries[rounds % len(summaries)]["trace_id"]
                results.append(("show", cli("show", trace_id, "--json", env=env)))
            progress.advance()
    finally:
        stop.set()
        progress.advance()  # never leave an agent waiting on a reader that is gone


def check_reader_result(command: str, result: subprocess.CompletedProcess[str], expected: dict[str, Expected]) -> int:
    """A reader either succeeded with valid output or failed with one clear busy line and exit 2."""
    if result.returncode == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "busy" in lines[0], result.stderr
        assert result.stdout == ""
        return 0
    assert result.returncode == 0, (command, result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout)
    if command == "show":  # a run is shown whole, or not listed at all: never half-ingested
        run = expected[document["trace_id"]]
        assert len(document["steps"]) == run.spans - 1, (run, len(document["steps"]))
        markers = {m.lower() for m in MARKER.findall(json.dumps(document))}
        assert markers == {run.marker}, (run.marker, markers)
    else:
        assert {item["trace_id"] for item in document} <= set(expected), "a listed run nobody recorded"
    return 1


def test_16_threads_and_16_tasks_record_while_clis_read_no_cross_talk_nothing_lost_or_doubled(home):
    finished: list[Expected] = []
    finished_lock = threading.Lock()
    failures: list[BaseException] = []

    def done(out: dict[str, str], marker: str, tools: int) -> None:
        assert out["marker"] == marker
        with finished_lock:
            finished.append(Expected(out["trace_id"], marker, spans_of(tools)))

    def thread_worker(worker: int) -> None:
        try:
            for i in range(RUNS_EACH):
                progress.wait_for(i)  # run i starts once the readers have read i times: runs and reads overlap
                tools = (worker + i) % 5
                marker = f"<t{worker}-{i}>"
                done(fault_agent(marker, tools=tools, pause=0.005), marker, tools)
                if i % 2:
                    orp.flush()
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    async def task_worker(worker: int) -> None:
        for i in range(RUNS_EACH):
            await asyncio.to_thread(progress.wait_for, i)
            tools = (worker + i) % 5
            marker = f"<a{worker}-{i}>"
            done(await fault_agent_async(marker, tools=tools, pause=0.005), marker, tools)
            if i % 2:
                orp.flush()

    async def tasks() -> None:
        await asyncio.gather(*(task_worker(worker) for worker in range(TASKS)))

    stop = threading.Event()
    results: list = []
    progress = Progress()
    # One patient reader (it waits as long as any wait here, so a loaded machine cannot make it fail) and one that
    # gives up after 0.2 s and so meets the other holding the store.
    readers = [
        threading.Thread(target=reader, args=(stop, results, timeout, progress)) for timeout in (str(WAIT_S), "0.2")
    ]
    for thread in readers:
        thread.start()
    threads = [threading.Thread(target=thread_worker, args=(worker,)) for worker in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        asyncio.run(tasks())
        for thread in threads:
            thread.join(WAIT_S)
        assert orp.flush()
    finally:
        stop.set()
        for thread in readers:
            thread.join(WAIT_S * 4)
    assert not failures, failures
    assert len(finished) == (THREADS + TASKS) * RUNS_EACH

    expected = {run.trace_id: run for run in finished}
    assert len(expected) == len(finished), "two runs shared a trace"
    succeeded = sum(check_reader_result(command, result, expected) for command, result in results)
    assert succeeded >= 2, [(c, r.returncode, r.stderr) for c, r in results]

    with Store.open(home=home) as store:
        counts = assert_stored_exactly_once(store, finished)
        assert sum(counts.values()) == sum(run.spans for run in finished), "spans nobody recorded are stored"
        roots = store.runs(limit=1000)
        assert sorted(r.trace_id for r in roots) == sorted(expected), "every run listed once, and no other"
        for run in finished:
            loaded = store.load_run(run.trace_id)
            assert loaded.snapshots["input"]["args"] == [run.marker]
            assert loaded.snapshots["output"]["structured"]["trace_id"] == run.trace_id
            assert {m.lower() for m in MARKER.findall(json.dumps(loaded.snapshots))} == {run.marker}
            steps = Counter(step.name.removesuffix("_async") for step in loaded.steps)
            assert steps == Counter({"kb_search": 1, "chat": 1, "fault-sub": 1, "lookup": run.spans - 4}), steps
            own_spans = {span.span_id for span in loaded.spans}
            for step in loaded.steps:
                assert step.parent_span_id in own_spans, step
                markers = {m.lower() for m in MARKER.findall(json.dumps(step.snapshots))}
                assert markers == {run.marker}, (run.marker, step.name, markers)
