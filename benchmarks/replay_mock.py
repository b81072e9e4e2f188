"""Mock replay of a 1,000-step run against loading that run from the store, measured in one process.

Records one run with ``--steps`` tool/model steps into a fresh embedded store, then alternates two timed
operations: ``Store.load_run`` of that trace (the load), and ``replay(mode="mock")`` of it, which loads the
run, re-runs the agent with every call answered from the recording, records the replay as a new trace,
rebuilds it and diffs it. It prints what the replay adds on top of its own load, as a multiple of the load.

    python benchmarks/replay_mock.py [--steps 1000] [--rounds 5]

Target (docs/performance.md): replay adds <= 1x the load time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import otel_replay as orp
from otel_replay.storage.store import Store


@orp.tool("fetch", risk="read")
def fetch(i: int) -> dict:
    return {"i": i, "payload": "x" * 64}


@orp.model("plan", provider="bench", model="bench-1")
def plan(step: int) -> dict:
    return {"next": step + 1, "usage": {"input_tokens": 10, "output_tokens": 2}}


@orp.agent("bench-agent")
def long_agent(steps: int) -> int:
    total = 0
    for i in range(steps // 2):
        plan(i)
        total += fetch(i)["i"]
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        orp.configure(home=home, exporter="spool")
        long_agent(args.steps)
        orp.flush()
        with Store.open(home=home) as store:
            (summary,) = store.runs()
            trace_id = summary.trace_id
            store.load_run(trace_id)  # warm up
            loads, replays = [], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                run = store.load_run(trace_id)
                loads.append(time.perf_counter() - start)
                start = time.perf_counter()
                result = orp.replay(trace_id, mode="mock", store=store)
                replays.append(time.perf_counter() - start)
                assert result.outcome == "matched", result.to_dict()["first_divergence"]
    load = statistics.median(loads)
    total = statistics.median(replays)
    added = (total - load) / load
    print(f"run: {len(run.steps)} steps")
    print(f"load_run                  : {load * 1000:8.1f} ms")
    print(f"mock replay (incl. load)  : {total * 1000:8.1f} ms")
    print(f"replay adds               : {added:.2f}x the load time  (target <= 1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
