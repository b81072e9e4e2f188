"""``otel-replay runs`` over a store of 100,000 runs, end to end, and ``Store.runs`` in-process.

Why it exists: listing the newest runs is the first thing a user does, and it must stay quick when the store
holds months of runs. The listing reads run roots (parentless ``invoke_agent …`` spans) newest first; the
Collector exporter's sort key starts with ``(ServiceName, SpanName, …)``, so the newest roots are not simply
the table's last rows.

What it builds (in a temporary folder, removed at the end; ``~/.otel-replay`` is never touched): one
embedded chDB store of ``--runs`` runs, each a root span plus 2 to 6 model/tool steps (about five spans a
run), cloned from the spans of a run recorded with the real API (the same generator as
``benchmarks/scale_load.py``: fresh ids, hashes and times over 30 days, six agents, three services, ~5% of
runs failed, snapshot events on every span), inserted in time order in batches of 200,000 rows through
``Store.insert_rows``; then it waits for background merges to settle.

What is timed:

* ``otel-replay runs --store chdb:///…`` as a subprocess, end to end (Python start, imports, opening the
  store, the query, the table printed): after one untimed run, ``--rounds`` times each for no filter,
  ``--agent support-agent`` and ``--status error``, medians reported; and, as the fixed cost any command
  pays, the same command against an empty store. Python caches bytecode (in the temporary folder) as an
  installed package does;
* ``Store.runs(limit=50)`` (plus the two filters) in one process: the first call (cold caches), then the
  median of ``--rounds`` more.

    python benchmarks/runs_listing.py [--runs 100000] [--rounds 5]

Target (docs/performance.md): ``otel-replay runs`` over 100,000 runs answers in under 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from _table import print_rows, row
from scale_load import AGENTS, DAY_NS, WINDOW_DAYS, FillerRuns, record_target, settle_merges, target_rows

BATCH_ROWS = 200_000
FILTERS: dict[str, tuple[str, ...]] = {
    "no filter": (),
    "--agent": ("--agent", AGENTS[0]),
    "--status error": ("--status", "error"),
}


def _store(folder: Path) -> Any:
    from otel_replay.storage.store import Store

    return Store.open(f"chdb://{folder / 'store'}", home=folder, ingest=False)


def build_worker(folder: Path, spool: Path, runs: int, seed: int) -> dict[str, Any]:
    """Build a store of ``runs`` runs in ``folder``; returns its statistics."""
    factory = FillerRuns(target_rows(spool), seed=seed)
    newest = time.time_ns()
    first = newest - WINDOW_DAYS * DAY_NS
    starts = sorted(factory.rng.randrange(first, newest) for _ in range(runs))
    started = time.perf_counter()
    pending: list[tuple[Any, ...]] = []
    with _store(folder) as store:
        for start in starts:
            pending.extend(factory.run(start, factory.rng.randint(3, 7)))
            if len(pending) >= BATCH_ROWS:
                store.insert_rows(pending)
                pending = []
        store.insert_rows(pending)
        build_s = time.perf_counter() - started
        settle_merges(store)
        spans, roots = store.client.query("SELECT count(), countIf(ParentSpanId = '') FROM otel_traces").result_rows[0]
        parts = store.client.query(
            "SELECT count() FROM system.parts WHERE active AND table = 'otel_traces'"
        ).result_rows[0][0]
    return {"spans": int(spans), "runs": int(roots), "parts": int(parts), "build_s": build_s}


def measure_worker(folder: Path, rounds: int) -> dict[str, Any]:
    """``Store.runs`` timings: the first call, then the median of ``rounds`` calls, per filter."""
    answer: dict[str, Any] = {}
    options = {"no filter": {}, "--agent": {"agent": AGENTS[0]}, "--status error": {"status": "error"}}
    with _store(folder) as store:
        for label, kwargs in options.items():
            t0 = time.perf_counter()
            listed = store.runs(limit=50, **kwargs)
            first = time.perf_counter() - t0
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                store.runs(limit=50, **kwargs)
                times.append(time.perf_counter() - t0)
            answer[label] = {
                "first": first,
                "median": statistics.median(times),
                "listed": len(listed),
                "newest_first": all(a.started_at >= b.started_at for a, b in pairwise(listed)),
            }
    return answer


def _worker(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("otel-replay")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from otel_replay.cli import main; main()"]


def time_cli(
    commands: dict[str, tuple[Path, tuple[str, ...]]],
    rounds: int,
    pycache: Path,
) -> dict[str, tuple[list[float], str]]:
    """Wall times of ``otel-replay runs --store … extra`` per command over ``rounds`` rounds, and its output.

    One untimed run of each command first; then the commands alternate within each round, so that a busy
    moment of the shared machine falls on all of them alike. Python may cache bytecode (in ``pycache``, not
    next to the sources), as it does in any installation, even where the environment turned that off.
    """
    prepared = {}
    for label, (folder, extra) in commands.items():
        command = [*_cli(), "runs", "--store", f"chdb://{folder / 'store'}", *extra]
        env = dict(os.environ, OTEL_REPLAY_HOME=str(folder), COLUMNS="160", PYTHONPYCACHEPREFIX=str(pycache))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run(command, capture_output=True, env=env, check=False)
        prepared[label] = (command, env)
    answers: dict[str, tuple[list[float], str]] = {label: ([], "") for label in commands}
    for _ in range(rounds):
        for label, (command, env) in prepared.items():
            t0 = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            answers[label][0].append(time.perf_counter() - t0)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
            answers[label] = (answers[label][0], done.stdout)
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the store (default 100000)")
    parser.add_argument("--rounds", type=int, default=5, help="timed repetitions of each command (median)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "build":
            answer = build_worker(Path(rest[0]), Path(rest[1]), int(rest[2]), int(rest[3]))
        else:
            answer = measure_worker(Path(rest[0]), int(rest[1]))
        print(json.dumps(answer))
        return 0

    work = Path(tempfile.mkdtemp(prefix="otel-replay-runs-"))
    try:
        source = work / "source"
        record_target(source, spans=10)
        folder, empty = work / "big", work / "empty"
        t0 = time.perf_counter()
        stats = _worker("build", str(folder), str(source / "spool"), str(args.runs), str(args.seed))
        print(
            f"store: {stats['runs']:,} runs, {stats['spans']:,} spans, {stats['parts']} parts; inserted in "
            f"{stats['build_s']:.1f}s, ready in {time.perf_counter() - t0:.1f}s"
        )
        if stats["runs"] != args.runs:
            print(f"MISMATCH: the store holds {stats['runs']} runs, expected {args.runs}", file=sys.stderr)
            return 1
        in_process = _worker("measure", str(folder), str(args.rounds))
        commands = {"empty store": (empty, ()), **{label: (folder, extra) for label, extra in FILTERS.items()}}
        # The empty store exists, so that listing it starts the embedded engine and opens the store as listing the
        # big one does; over a store that does not exist yet, `runs` answers without starting the engine at all.
        subprocess.run(
            [*_cli(), "db", "init", "--store", f"chdb://{empty / 'store'}"],
            env=dict(os.environ, OTEL_REPLAY_HOME=str(empty)),
            capture_output=True,
            check=True,
        )
        cli = time_cli(commands, args.rounds, work / "pycache")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"cpus: {os.cpu_count()}  {args.rounds} rounds, commands alternating (median)")
    fixed = cli.pop("empty store")[0]
    print(
        f"otel-replay runs, empty store (fixed cost)   : {statistics.median(fixed) * 1000:7.0f} ms   "
        f"[{', '.join(f'{t * 1000:.0f}' for t in fixed)}]"
    )
    verdicts = []
    table = []
    for label, (times, output) in cli.items():
        rows = sum(1 for line in output.splitlines() if line.startswith("│"))
        median = statistics.median(times)
        added = statistics.median(t - f for t, f in zip(times, fixed, strict=False))
        ok = median < 1.0 and rows == 50
        verdicts.append(ok)
        print(
            f"otel-replay runs {label:15} ({rows:2} rows)   : {median * 1000:7.0f} ms   "
            f"[{', '.join(f'{t * 1000:.0f}' for t in times)}]  {added * 1000:+5.0f} ms over the empty store  "
            f"(target < 1 s): {'PASS' if ok else 'FAIL'}"
        )
        table.append(
            row(
                f"listing: `otel-replay runs` ({label}) over {args.runs:,} runs / over an empty store",
                f"{median / statistics.median(fixed):.2f}x ({median * 1000:.0f} ms)",
                "under 1 s",
                ok,
            )
        )
    for label, timing in in_process.items():
        order = "" if timing["newest_first"] else "  NOT NEWEST FIRST"
        print(
            f"Store.runs(limit=50) {label:15}     : {timing['median'] * 1000:7.1f} ms   "
            f"(first call {timing['first'] * 1000:.1f} ms, {timing['listed']} runs){order}"
        )
        verdicts.append(timing["newest_first"] and timing["listed"] == 50)
    print_rows(table)
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
