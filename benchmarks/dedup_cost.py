"""What reading each span once costs: loading a run and listing runs in a 1,000,000-span store, before and after.

Why it exists: readers keep one row per ``(TraceId, SpanId)`` (``LIMIT 1 BY`` in the store's queries, first
copy kept in ``build_run``) so that a span delivered twice counts once. That work must not push the trace
load at 1M spans outside the goals of ``benchmarks/scale_load.py`` (large-store load <= 2x the small-store
load, and under 250 ms).

What it builds (in a temporary folder, removed at the end): one embedded chDB store of ``--spans`` spans,
exactly as ``benchmarks/scale_load.py`` builds its large store (the same 1,000-span target run recorded with
the real API, the same filler runs, the same batches; it runs that script's build worker).

What is timed, in ``--rounds`` rounds, each a fresh process per code tree, the trees alternating within a
round (2 warm-up calls, then the median of ``--loads``): ``Store.load_spans`` and ``Store.load_run`` of the
target run, and ``Store.runs(limit=50)``. The trees are ``--before`` (a folder holding the ``otel_replay``
package without the dedup, e.g. ``git archive`` of the commit before it) and this checkout. Then every row
of the target run is inserted twice more (three copies of each span) and the current tree is measured again;
the before tree's answers on that store are printed to show what the dedup fixes.

    python benchmarks/dedup_cost.py --before /tmp/otel-replay-before [--spans 1000000] [--rounds 3] [--loads 9]
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_load  # the sibling benchmark's store builder
from _table import print_rows, row

HERE = Path(__file__).resolve().parent.parent


def measure_worker(folder: Path, trace_id: str, loads: int) -> dict[str, Any]:
    """Median times of ``load_spans``, ``load_run`` and ``runs(limit=50)`` after two warm-up calls."""
    with scale_load._store(folder) as store:
        for _ in range(2):
            run = store.load_run(trace_id)
            store.runs(limit=50)
        times: dict[str, list[float]] = {"load_spans": [], "load_run": [], "runs": []}
        for _ in range(loads):
            t0 = time.perf_counter()
            spans = store.load_spans(trace_id)
            times["load_spans"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run = store.load_run(trace_id)
            times["load_run"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            summaries = store.runs(limit=50)
            times["runs"].append(time.perf_counter() - t0)
    return {
        **{what: statistics.median(values) for what, values in times.items()},
        "spans": len(spans),
        "steps": len(run.steps),
        "run_spans": len(run.spans),
        "listed": len(summaries),
        "listed_traces": len({summary.trace_id for summary in summaries}),
    }


def duplicate_worker(folder: Path, trace_id: str, copies: int) -> dict[str, Any]:
    """Insert every stored row of ``trace_id`` ``copies`` more times, unchanged (as a retried batch would be)."""
    with scale_load._store(folder) as store:
        for _ in range(copies):
            store.client.command(
                "INSERT INTO otel_traces SELECT * FROM otel_traces WHERE TraceId = {t:String} LIMIT 1 BY SpanId",
                parameters={"t": trace_id},
            )
        scale_load.settle_merges(store)
        count = store.client.query(
            "SELECT count() FROM otel_traces WHERE TraceId = {t:String}", parameters={"t": trace_id}
        ).result_rows[0][0]
    return {"rows": int(count)}


def _worker(tree: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", *args], capture_output=True, text=True, check=False, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"worker {args[0]} ({tree}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rounds(trees: dict[str, Path], folder: Path, trace_id: str, rounds: int, loads: int) -> dict[str, list[dict]]:
    results: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for index in range(rounds):
        order = list(trees.items()) if index % 2 == 0 else list(reversed(trees.items()))
        for label, tree in order:
            results[label].append(_worker(tree, "measure", str(folder), trace_id, str(loads)))
    return results


def _line(label: str, answers: list[dict[str, Any]], what: str) -> float:
    values = [answer[what] for answer in answers]
    print(
        f"  {what:10} {label:22} {statistics.median(values) * 1000:7.1f} ms   rounds: "
        + ", ".join(f"{v * 1000:.1f}" for v in values)
    )
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", type=Path, help="folder holding the otel_replay package before the dedup")
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans in the store (default 1000000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loads", type=int, default=9)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, folder, trace_id, number = args.worker
        worker = measure_worker if kind == "measure" else duplicate_worker
        print(json.dumps(worker(Path(folder), trace_id, int(number))))
        return 0
    if args.before is None or not (args.before / "otel_replay").is_dir():
        parser.error("--before must name a folder holding the otel_replay package before the dedup")

    trees = {"before": args.before.resolve(), "after": HERE}
    work = Path(tempfile.mkdtemp(prefix="otel-replay-dedup-"))
    try:
        source, folder = work / "source", work / "store"
        scale_load.record_target(source)
        t0 = time.perf_counter()
        stats = scale_load._worker("build", str(folder), str(source / "spool"), str(args.spans), str(args.seed))
        trace_id = stats["trace_id"]
        print(
            f"store: {stats['spans']:,} spans, {stats['traces']:,} traces, {stats['parts']} parts, "
            f"{stats['mib']:.1f} MiB; ready in {time.perf_counter() - t0:.1f}s; target trace {trace_id}"
        )
        single = _rounds(trees, folder, trace_id, args.rounds, args.loads)
        copies = _worker(HERE, "duplicate", str(folder), trace_id, "2")
        print(f"target run inserted twice more: {copies['rows']:,} rows for its {scale_load.TARGET_SPANS:,} spans")
        tripled = _rounds(trees, folder, trace_id, args.rounds, args.loads)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"cpus: {os.cpu_count()}  load average {os.getloadavg()[0]:.1f}  {args.rounds} rounds x {args.loads} loads "
        "(median per round; ratios are medians of the per-round ratios, the trees measured back to back)"
    )
    ok = True
    table = []
    for what in ("load_spans", "load_run", "runs"):
        print(what)
        _line("before, single rows", single["before"], what)
        after = _line("after, single rows", single["after"], what)
        _line("after, 3 copies of run", tripled["after"], what)
        _line("before, 3 copies of run", tripled["before"], what)
        paired = [b[what] / a[what] for a, b in zip(single["before"], single["after"], strict=True)]
        grown = [b[what] / a[what] for a, b in zip(single["after"], tripled["after"], strict=True)]
        print(
            f"  after / before: {statistics.median(paired):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in paired)}); "
            f"3 copies / single, after: {statistics.median(grown):.2f}x"
        )
        if what != "runs":
            ok = ok and after < 0.250
        table.append(
            row(
                f"reading each span once: `{'Store.runs(limit=50)' if what == 'runs' else what}` in a "
                f"{args.spans:,}-span store, with the dedup / before it",
                f"{statistics.median(paired):.2f}x",
                "none (the loads under 250 ms)" if what != "runs" else "none",
            )
        )
    for label, answers in (("single rows", single), ("3 copies of run", tripled)):
        for tree in trees:
            answer = answers[tree][-1]
            print(
                f"{tree:6} {label:16} load_spans {answer['spans']:>5} spans, run {answer['steps']:>5} steps / "
                f"{answer['run_spans']:>5} spans, runs listed {answer['listed']} ({answer['listed_traces']} traces)"
            )
    good = tripled["after"][-1]
    correct = good["spans"] == scale_load.TARGET_SPANS and good["steps"] == scale_load.TARGET_SPANS - 1
    correct = correct and good["listed"] == good["listed_traces"]
    print(f"after, 3 copies: one row per span and one entry per run: {'PASS' if correct else 'FAIL'}")
    print(f"load under 250 ms at {args.spans:,} spans (after): {'PASS' if ok else 'FAIL'}")
    print_rows(table)
    return 0 if ok and correct else 1


if __name__ == "__main__":
    raise SystemExit(main())
