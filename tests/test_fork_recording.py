"""Recording across ``fork``: a parent that configured recording forks children that record too (pre-fork servers).

Each scenario runs in a process of its own (``tests/fork_recording_scenario.py``; the test process, which has chDB
loaded, is never forked): the parent records, then forks children with ``os.fork`` and ``multiprocessing``'s
``fork`` context while another of its threads is stopped in the middle of an export (at the ``spool.append``
fault point, or in an insert the fake ClickHouse server holds) or of a reconfiguration, and the children record
runs with the real decorators (one of them configuring anew) and end in every way a worker ends. Then: every run
of every process is stored exactly once with all its steps, each process wrote its own segments, the keyed
fingerprints are the same everywhere, and a child never talks over the parent's ClickHouse connection. A
deadlock in a child shows as the scenario's time guard.

Also: an exporter shut down and dropped is collected, although the fork handlers it registered stay registered.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import socket
import subprocess
import sys
import weakref
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from fault_agents import Expected, assert_stored_exactly_once, fault_agent
from fork_recording_scenario import SECRET
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_replay.exporting.clickhouse import ClickHouseSpanExporter
from otel_replay.exporting.setup import build_runtime, close
from otel_replay.exporting.spool import OPEN_SUFFIX, SpoolExporter, read_segment, sealed_segments
from otel_replay.redaction import Redactor
from otel_replay.runtime import active
from otel_replay.storage.store import Store

SCRIPT = Path(__file__).resolve().parent / "fork_recording_scenario.py"
SCENARIO_GUARD_S = 240  # a hang (a child deadlocked after fork) fails the test instead of hanging it; never asserted
FINGERPRINT = re.compile(rb"\[REDACTED:openai_api_key:(hmac-sha256:[0-9a-f]+)\]")
CHILDREN = ("os-exit", "os-underscore-exit", "mp-return", "mp-reconfigure")
PARENT_RUNS = ("parent-before", "parent-queued", "parent-between", "parent-after")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_scenario(mode: str, home: Path, tmp_path: Path, *args: str, **env: str) -> tuple[list[dict[str, Any]], dict]:
    """Run the scenario script; returns the runs it recorded (one dict per run) and the parent's closing line."""
    results = tmp_path / "results.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), mode, str(home), str(results), *args],
        env=dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="600000", **env),  # spans wait in the queue until a flush
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its children too are ended if it hangs
    )
    try:
        _, stderr = process.communicate(timeout=SCENARIO_GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        pytest.fail(f"the fork scenario hung (a process deadlocked after fork?); its stderr:\n{stderr[-3000:]}")
    assert process.returncode == 0, stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    parent = [line for line in lines if line["role"] == "parent"]
    assert len(parent) == 1, lines
    assert all(code == 0 for code in parent[0]["codes"].values()), parent[0]["codes"]
    assert parent[0]["gated_flush"] and parent[0]["final_flush"], "a flush of the parent returned False"
    return [line for line in lines if line["role"] != "parent"], parent[0]


def fingerprint_of_the_secret(home: Path) -> bytes:
    """The keyed fingerprint of :data:`SECRET` under the home's key (``<home>/redaction.key``)."""
    text, replaced = Redactor.for_home(home).scrub_text(SECRET, "test")
    assert replaced == 1
    found = FINGERPRINT.findall(text.encode())
    assert len(found) == 1, text
    return found[0]


def check_segments(home: Path, runs: list[dict[str, Any]]) -> None:
    """Every process sealed its own segments, none damaged, each holding only its own process's runs (each span
    in one segment once), no secret in clear, and every run holding the secret's fingerprint under the home's
    key (the key is the same in every process)."""
    spool = home / "spool"
    assert not list(spool.glob("*" + OPEN_SUFFIX)), "a process ended without sealing its segment (no flush at exit)"
    traces_by_pid: defaultdict[int, set[str]] = defaultdict(set)
    fingerprints: defaultdict[str, set[bytes]] = defaultdict(set)
    spans: Counter[tuple[str, str]] = Counter()
    for path in sealed_segments(spool):
        assert SECRET.encode() not in path.read_bytes()
        segment = read_segment(path)
        assert segment.skipped == 0, segment.problems
        pid = int(path.name.split("-")[2])  # <created ns>-<host>-<pid>-<random>.seg
        for payload in segment.payloads:
            for resource_spans in ExportTraceServiceRequest.FromString(payload).resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        trace_id = span.trace_id.hex()
                        traces_by_pid[pid].add(trace_id)
                        spans[(trace_id, span.span_id.hex())] += 1
                        fingerprints[trace_id].update(FINGERPRINT.findall(span.SerializeToString()))
    expected_by_pid: defaultdict[int, set[str]] = defaultdict(set)
    for run in runs:
        expected_by_pid[run["pid"]].add(run["trace_id"])
    assert dict(traces_by_pid) == dict(expected_by_pid), "a run is missing, or in another process's segment"
    assert all(count == 1 for count in spans.values()), "a span was written twice"
    expected = fingerprint_of_the_secret(home)
    assert all(expected in fingerprints[run["trace_id"]] for run in runs), "a process used another key"


def check_store(store: Store, runs: list[dict[str, Any]]) -> None:
    """Every run once, with all its spans and steps; the ingest found nothing damaged and nothing to adopt."""
    report = store.last_ingest
    assert report is not None
    assert (report.skipped_records, report.problems, report.adopted_segments) == (0, (), 0)
    assert_stored_exactly_once(store, [Expected(run["trace_id"], run["role"], run["spans"]) for run in runs])
    summaries = Counter(summary.trace_id for summary in store.runs(limit=100))
    assert summaries == Counter(run["trace_id"] for run in runs)
    by_trace = {summary.trace_id: summary for summary in store.runs(limit=100)}
    for run in runs:
        summary = by_trace[run["trace_id"]]
        assert (summary.status, summary.step_count) == ("ok", run["spans"] - 1), run["role"]


def test_a_parent_and_its_forked_children_each_record_into_their_own_segments_and_every_run_is_stored_once(
    home: Path, tmp_path: Path
) -> None:
    runs, _ = run_scenario("spool", home, tmp_path)
    roles = [run["role"] for run in runs]
    assert sorted(roles) == sorted([*PARENT_RUNS, *CHILDREN, "mp-configure-during-reconfigure"])
    check_segments(home, runs)
    with Store.open(home=home) as store:
        check_store(store, runs)
    for path in home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_forked_children_spool_when_the_clickhouse_server_is_unreachable(home: Path, tmp_path: Path) -> None:
    runs, _ = run_scenario(
        "clickhouse-down", home, tmp_path, str(free_port()), OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS="0"
    )
    assert sorted(run["role"] for run in runs) == sorted([*PARENT_RUNS, *CHILDREN, "mp-configure-during-reconfigure"])
    check_segments(home, runs)
    with Store.open(f"chdb://{tmp_path}/later", home=home) as store:  # the ingest a server's store would run
        check_store(store, runs)


def test_forked_children_insert_over_connections_of_their_own_never_the_parents(home: Path, tmp_path: Path) -> None:
    runs, parent = run_scenario("clickhouse-server", home, tmp_path)
    log = parent["server_log"]
    assert not (home / "spool").exists() or not any((home / "spool").iterdir()), "a batch was spooled"
    pid_of = {run["trace_id"]: run["pid"] for run in runs}
    inserts = [entry for entry in log if entry["insert"]]
    carried = Counter(trace for entry in inserts for trace in entry["trace_ids"] if trace in pid_of)
    assert carried == Counter(list(pid_of)), "a run was inserted twice or never"
    for entry in inserts:
        assert len({pid_of[t] for t in entry["trace_ids"] if t in pid_of}) == 1, "an insert mixed processes"
        assert not entry["secret_seen"]
    expected = fingerprint_of_the_secret(home).decode()
    assert all(expected in entry["fingerprints"] for entry in inserts), "a process used another key"
    parent_ports = {entry["port"] for entry in log if entry["phase"] in ("start", "gate", "after")}
    child_ports = {entry["port"] for entry in log if entry["phase"] in ("idle-fork", "children")}
    assert child_ports and not parent_ports & child_ports, "a child talked over the parent's connection"
    for port in child_ports:  # each child's connection starts with a client of its own (its handshake)
        first = next(entry for entry in log if entry["port"] == port)
        assert first["first_words"].startswith("SELECT version()"), first
    child_inserts = [e for e in inserts if e["phase"] in ("idle-fork", "children")]
    assert len(child_inserts) == 1 + len(CHILDREN)


def test_an_exporter_shut_down_and_dropped_is_collected_despite_its_fork_handler(home: Path) -> None:
    """``os.register_at_fork`` handlers are never unregistered: they must not keep their exporter alive (a process
    that builds runtimes over and over, or reconfigures, would keep every exporter it ever made)."""
    spool = SpoolExporter(home / "dropped-spool")
    clickhouse = ClickHouseSpanExporter(url=f"http://127.0.0.1:{free_port()}/default", home=home)
    rt = build_runtime(exporter="spool", home=home / "dropped-runtime")
    with active(rt):
        fault_agent("<dropped>", tools=1)
    assert close(rt)
    spool.shutdown()
    clickhouse.shutdown()
    refs = [weakref.ref(spool), weakref.ref(clickhouse), weakref.ref(rt.exporter)]
    assert sealed_segments(home / "dropped-runtime" / "spool"), "the runtime recorded nothing"
    del spool, clickhouse, rt
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]
