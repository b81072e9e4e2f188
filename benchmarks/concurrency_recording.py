"""Recording throughput with 8 threads against 1 thread, and not a run lost on the way to the store.

Why it exists: agents are served from thread pools. Recording must stay correct when many runs are recorded
at once in one process (each run's steps in its own trace, nothing dropped), and its throughput must not
collapse under contention on the span processor, the spool exporter's lock or the GIL. Python runs one
thread at a time, so eight threads are not expected to record faster than one: the ratio shows whether
contention costs anything on top.

What is timed: ``--runs`` runs of an ``@otel_replay.agent`` with ``--steps`` steps each (model and tool
steps alternating, ~0.5 KiB JSON arguments, a state snapshot), recorded with the real API and the default
spool exporter in a temporary home, then ``otel_replay.flush()`` (so the spans are on disk), once by one
thread and once split over 8 threads started together. ``--rounds`` rounds alternate the two; the ratio is
the median of the per-round ratios of throughputs (8 threads / 1 thread).

Then the spool is ingested into an embedded store and checked: as many runs as were recorded, distinct run
ids, and every trace holding exactly its root and its steps.

    python benchmarks/concurrency_recording.py [--runs 800] [--steps 8] [--threads 8] [--rounds 3]

Target (docs/performance.md): the 8-thread throughput does not collapse (ratio well above 0.5; with the GIL
about 1 is the ceiling) and no run is lost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

from _table import print_rows, row

import otel_replay as orp

ARGUMENTS = {
    "customer_id": "c-1042",
    "query": "status of the replacement kettle shipped last week to the Lyon address",
    "filters": {"region": "eu-west", "lang": "en", "tags": ["kitchen", "warranty"]},
    "items": [{"sku": f"KT-{i:03d}", "qty": i} for i in range(4)],
}


@orp.model("plan", provider="openai", model="gpt-4o-mini")
def plan(step: int, request: dict) -> dict:
    return {"tool": "lookup_order", "step": step, "usage": {"input_tokens": 412, "output_tokens": 38}}


@orp.tool("lookup_order", risk="read")
def lookup_order(step: int, request: dict) -> dict:
    return {"order_id": request["customer_id"], "status": "shipped", "step": step}


def make_agent(steps: int):
    @orp.agent("concurrent-agent")
    def support_agent(worker: int, index: int) -> str:
        orp.record_state({"worker": worker, "index": index})
        for step in range(steps):
            if step % 2 == 0:
                plan(step, ARGUMENTS)
            else:
                lookup_order(step, ARGUMENTS)
        return f"answer {worker}-{index}"

    return support_agent


def timed(agent, runs: int, threads: int) -> float:
    """Seconds to record ``runs`` runs split over ``threads`` threads, flush included."""
    share = [runs // threads + (1 if t < runs % threads else 0) for t in range(threads)]
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        barrier.wait()
        try:
            for index in range(share[worker]):
                agent(worker, index)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in pool:
        thread.join()
    orp.flush()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=800, help="runs recorded per measurement (default 800)")
    parser.add_argument("--steps", type=int, default=8, help="steps per run (default 8)")
    parser.add_argument("--threads", type=int, default=8, help="threads of the concurrent side (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds alternating 1 and N threads (median)")
    args = parser.parse_args()
    agent = make_agent(args.steps)
    with tempfile.TemporaryDirectory(prefix="otel-replay-threads-") as home:
        orp.configure(home=home, exporter="spool")
        recorded = 0
        timed(agent, 50, 1), timed(agent, 50, args.threads)  # warm up both sides
        recorded += 100
        single, multi, ratios = [], [], []
        for _ in range(args.rounds):
            one = timed(agent, args.runs, 1)
            many = timed(agent, args.runs, args.threads)
            recorded += 2 * args.runs
            single.append(args.runs / one)
            multi.append(args.runs / many)
            ratios.append(one / many)
        t0 = time.perf_counter()
        with orp.Store.open(home=home) as store:
            ingest_s = time.perf_counter() - t0
            summaries = store.runs(limit=recorded + 1000)
            spans = store.client.query("SELECT count() FROM otel_traces").result_rows[0][0]
            odd_traces = store.client.query(
                "SELECT count() FROM (SELECT TraceId FROM otel_traces GROUP BY TraceId "
                "HAVING count() != {expected:UInt32})",
                parameters={"expected": args.steps + 1},
            ).result_rows[0][0]

    spans_per_run = args.steps + 1
    ratio = statistics.median(ratios)
    run_ids = {s.run_id for s in summaries}
    wrong_steps = sum(1 for s in summaries if s.step_count != args.steps)
    print(
        f"cpus: {os.cpu_count()}  {args.runs} runs x {args.steps} steps ({spans_per_run} spans a run) per "
        f"measurement, {args.rounds} rounds (median)"
    )
    for label, rates in (("1 thread", single), (f"{args.threads} threads", multi)):
        rate = statistics.median(rates)
        print(
            f"{label:11}: {rate:7.0f} runs/s  {rate * args.steps:8.0f} steps/s   "
            f"rounds: {', '.join(f'{x:.0f}' for x in rates)} runs/s"
        )
    print(f"ratio {args.threads} threads / 1 thread: {ratio:.2f}x  (must not collapse; the GIL caps it near 1x)")
    print(
        f"store after ingest ({ingest_s:.1f}s): {len(summaries)} runs ({len(run_ids)} distinct run ids) of "
        f"{recorded} recorded, {spans} spans of {recorded * spans_per_run}, {odd_traces} traces with a wrong "
        f"span count, {wrong_steps} runs with a wrong step count"
    )
    lost = len(summaries) != recorded or len(run_ids) != recorded or spans != recorded * spans_per_run
    ok = not lost and not odd_traces and not wrong_steps and ratio > 0.5
    print("no run lost, every trace whole: " + ("PASS" if not lost and not odd_traces and not wrong_steps else "FAIL"))
    print(f"throughput did not collapse (ratio > 0.5): {'PASS' if ratio > 0.5 else 'FAIL'}")
    print_rows(
        [
            row(
                f"recording from {args.threads} threads / from 1 thread (runs per second; every run stored whole)",
                f"{ratio:.2f}x",
                "> 0.5 (no collapse; the GIL caps it near 1x), no run lost",
                ok,
            )
        ]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
