"""Replay lab throughput: a cohort of recorded demo runs replayed deterministically with 1 and 2 workers, against
replaying them one ``otel-replay replay`` CLI call at a time.

Records ``--runs`` runs of the demo support agent (its three questions cycled) into a fresh home, opens the store
once (the spool is ingested before anything is timed), then times:

* ``otel_replay.lab(mode="deterministic", workers=1)`` (in the lab process) and ``workers=2`` (two worker
  processes) over the whole cohort (every run must match): wall time, replays per second, replays per second per
  worker, and per worker CPU second (the CPU time of the worker processes, or of the lab process for 1 worker,
  which does not depend on what else the machine runs);
* ``--cli-sample`` calls of ``otel-replay replay TRACE_ID --mode deterministic``, each a process of its own, as a
  script replaying the cohort one run at a time would make them. Their mean wall time is extrapolated to the
  whole cohort (``N x mean``): the cohort is not replayed that way in full.

    python benchmarks/lab_throughput.py [--runs 500] [--cli-sample 5]

Goals (docs/performance.md): at least 25 replays/s per worker, at least 20x the one-call-at-a-time path, and
linear in workers up to the core count (the 1 -> 2 workers speed-up is printed; on a machine with fewer than 2
free cores it cannot be 2x). It exits 1 when the ratio to the CLI path or the replays per worker CPU second
(the per-worker rate on a core of the worker's own, which other load on the machine does not change) misses
its goal.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from _table import print_rows, row


def _record(runs: int) -> None:
    import otel_replay as orp
    from otel_replay.demo import agent as demo

    for i in range(runs):
        question, customer = demo.QUESTIONS[i % len(demo.QUESTIONS)]
        try:
            demo.support_agent(question, customer=customer)
        except KeyError:
            pass  # the demo's unknown order, on purpose
    orp.flush()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _lab(workers: int, runs: int) -> dict[str, Any]:
    import otel_replay as orp

    children, own = _children_cpu(), _own_cpu()
    start = time.perf_counter()
    result = orp.lab(mode="deterministic", workers=workers, fail_if=["diverged > 0"])
    wall = time.perf_counter() - start
    # --workers 1 replays in the lab process: its own CPU time is the worker's (cohort and ingest included)
    worker_cpu = _own_cpu() - own if workers == 1 else _children_cpu() - children
    totals = result.summary["totals"]
    assert totals["matched"] == runs and not result.failed, totals
    return {
        "wall": wall,
        "per_s": runs / wall,
        "per_worker": runs / wall / workers,
        "per_cpu_s": runs / worker_cpu if worker_cpu else float("nan"),
        "lab_cpu": _own_cpu() - own,
    }


def _cli_sample(trace_ids: list[str], count: int) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG")}
    times = []
    for trace_id in trace_ids[:count]:
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "otel_replay.cli", "replay", trace_id, "--mode", "deterministic"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        times.append(time.perf_counter() - start)
        assert out.returncode == 0, out.stderr
    return statistics.mean(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--cli-sample", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["OTEL_REPLAY_HOME"] = home
        import otel_replay as orp

        orp.configure(home=home, exporter="spool")
        _record(args.runs)
        with orp.Store.open() as store:  # ingest the recording before anything is timed
            trace_ids = [s.trace_id for s in store.runs(kind="original", limit=args.runs)]
        one = _lab(1, args.runs)
        two = _lab(2, args.runs)
        cli_mean = _cli_sample(trace_ids, args.cli_sample)
    cli_total = cli_mean * args.runs
    print(f"cohort: {args.runs} recorded demo runs, deterministic mode, every replay matched")
    for workers, lab in ((1, one), (2, two)):
        print(
            f"{workers} worker{'s' if workers > 1 else ' '}: {lab['wall']:7.2f} s  {lab['per_s']:6.1f} replays/s  "
            f"{lab['per_worker']:6.1f} replays/s per worker  {lab['per_cpu_s']:6.1f} replays per worker CPU second  "
            f"(lab process: {lab['lab_cpu']:.1f} CPU s)"
        )
    print(
        f"one CLI call at a time: {cli_mean:.2f} s per call (mean of {args.cli_sample} calls), "
        f"extrapolated to {args.runs} runs: {cli_total:.0f} s"
    )
    print(f"lab with 2 workers vs one CLI call at a time: {cli_total / two['wall']:.1f}x  (goal >= 20x)")
    print(f"speed-up 1 -> 2 workers: {one['wall'] / two['wall']:.2f}x  (cores: {os.cpu_count()})")
    print(
        f"per worker: {two['per_worker']:.1f} replays/s wall, {two['per_cpu_s']:.1f} per worker CPU second "
        "(goal >= 25; the CPU figure is what a worker does on a core of its own)"
    )
    versus_cli = cli_total / two["wall"]
    print_rows(
        [
            row(
                f"lab: {args.runs} deterministic replays with 2 workers / one `otel-replay replay` call at a time "
                f"(the CLI timed on {args.cli_sample} calls, extrapolated)",
                f"{versus_cli:.0f}x",
                ">= 20x",
                versus_cli >= 20,
            ),
            row(
                "lab: replays per worker CPU second, 2 workers",
                f"{two['per_cpu_s']:.0f} per s (1 -> 2 workers: {one['wall'] / two['wall']:.2f}x)",
                ">= 25 per s",
                two["per_cpu_s"] >= 25,
            ),
        ]
    )
    return 0 if versus_cli >= 20 and two["per_cpu_s"] >= 25 else 1


if __name__ == "__main__":
    sys.exit(main())
