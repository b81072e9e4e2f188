"""Mock replay of a 1,000-step run against loading that run from the store, measured in one process.

Records one run with ``--steps`` tool/model steps into a fresh embedded store, then alternates two timed
operations: ``Store.load_run`` of that trace (the load), and ``replay(mode="mock")`` of it, which loads the
run, re-runs the agent with every call answered from the recording, records the replay as a new trace,
rebuilds it and diffs it. It prints what the replay adds on top of its own load, as a multiple of the load.

    python benchmarks/replay_mock.py [--steps 1000] [--rounds 5] [--phases]
    python benchmarks/replay_mock.py --replay-run [--rounds 200] [--phases]

``--replay-run`` times something else: ``replay_run`` of the demo agent's recorded run (6 steps, no store: the
replay is built from the spans the process saw, as a worker replaying many small runs does), ``--rounds`` times
in one process; its per-replay fixed costs are most of it.

``--phases`` also prints where a replay's time goes (median per phase over the rounds, and the time full
garbage collections took per replay and per load): it wraps the engine's internal steps with timers, so the
totals it prints carry a little overhead of their own; the figures above it are measured without it. "store
the replay" is the straight insert of the replay's rows (or, on the exporter's path, the spool's ingest);
"build the replay's run" reads those rows as the store reads them and rebuilds the run.

"replay adds N x the load" is (median replay time - median load time) / median load time: what a replay costs
beyond loading the run it replays, in loads. The target ``<= 1x`` means a whole replay, its own load included,
takes at most twice as long as loading the run. The same ratio is also printed from the process CPU time of
loads and replays (chDB's threads included), which swings much less than wall time on a busy shared machine.

Target (docs/performance.md): replay adds <= 1x the load time.
"""

from __future__ import annotations

import argparse
import collections
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

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


class Phases:
    """Wall time of the replay engine's internal steps, and of full garbage collections, per replay."""

    STEPS = (
        ("store", "load_run", "load the original"),
        ("engine", "load_entrypoint", "import the entrypoint"),
        ("engine", "_call", "run the agent"),
        ("setup", "flush", "flush the replay trace"),
        ("capture", "store_replay", "store the replay"),
        ("capture", "replay_run", "build the replay's run"),
        ("diff", "diff_runs", "diff"),
    )

    def __init__(self) -> None:
        from otel_replay.exporting import setup
        from otel_replay.replay import diff, engine, storing

        self.modules: dict[str, Any] = {
            "engine": engine,
            "setup": setup,
            "diff": diff,
            "capture": storing.Capture,
            "store": Store,
        }
        self.times: dict[str, list[float]] = collections.defaultdict(list)
        self.current = "load"
        self._gc_start = 0.0
        for module, name, label in self.STEPS:
            setattr(self.modules[module], name, self._timed(getattr(self.modules[module], name), label))
        gc.callbacks.append(self._collection)

    def _timed(self, func: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                if self.current == "replay":  # the loads the benchmark times itself are not a replay's phase
                    self.times[label].append(time.perf_counter() - start)

        return timed

    def _collection(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.times[f"full collections during a {self.current}"].append(time.perf_counter() - self._gc_start)

    def report(self, rounds: int) -> None:
        print("phases of one replay (medians):")
        for _, _, label in self.STEPS:
            spent = self.times[label]
            shown = f"{statistics.median(spent) * 1000:8.1f} ms" if spent else "     not called"
            print(f"  {label:26s}: {shown}")
        for what in ("replay", "load"):
            spent = self.times[f"full collections during a {what}"]
            print(
                f"  full collections per {what:6s}: {sum(spent) / rounds * 1000:8.1f} ms "
                f"({len(spent)} in {rounds} rounds)"
            )


def small_replays(rounds: int, phases: Phases | None) -> int:
    """``replay_run`` (no store: the replay is built from the spans the process saw) of the demo agent's run,
    ``rounds`` times in one process: what a worker replaying many small runs pays per replay."""
    from otel_replay.demo import agent as demo
    from otel_replay.replay.engine import replay_run

    with tempfile.TemporaryDirectory() as home:
        orp.configure(home=home, exporter="spool")
        with orp.identity(tenant="acme-eu", role="customer", session="bench"):
            demo.support_agent("Where is my order 1042?", customer="ana")
        orp.flush()
        with Store.open(home=home) as store:
            (summary,) = store.runs()
            original = store.load_run(summary.trace_id)
        replay_run(original, mode="mock")  # warm up
        if phases is not None:
            phases.times.clear()
            phases.current = "replay"
        walls, cpus = [], []
        for _ in range(rounds):
            start, cpu = time.perf_counter(), time.process_time()
            result = replay_run(original, mode="mock")
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            assert result.outcome == "matched", result.to_dict()["first_divergence"]
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"run: {len(original.steps)} steps, {len(original.spans)} spans (the demo agent), exporter: spool")
    print(f"replay_run (no store)     : {wall * 1000:8.2f} ms  ({1 / wall:.0f} replays/s)")
    print(f"process CPU per replay_run: {cpu * 1000:8.2f} ms")
    if phases is not None:
        phases.report(rounds)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--phases", action="store_true", help="also time the replay's phases (adds overhead)")
    parser.add_argument(
        "--replay-run",
        action="store_true",
        help="instead, time replay_run (no store) of the demo agent's 6-step run, --rounds times in one process",
    )
    args = parser.parse_args()
    phases = Phases() if args.phases else None
    if args.replay_run:
        return small_replays(args.rounds, phases)
    with tempfile.TemporaryDirectory() as home:
        orp.configure(home=home, exporter="spool")
        long_agent(args.steps)
        orp.flush()
        with Store.open(home=home) as store:
            (summary,) = store.runs()
            trace_id = summary.trace_id
            store.load_run(trace_id)  # warm up
            loads, replays, load_cpu, replay_cpu = [], [], [], []
            if phases is not None:
                phases.times.clear()
            for _ in range(args.rounds):
                if phases is not None:
                    phases.current = "load"
                start, cpu = time.perf_counter(), time.process_time()
                run = store.load_run(trace_id)
                loads.append(time.perf_counter() - start)
                load_cpu.append(time.process_time() - cpu)
                if phases is not None:
                    phases.current = "replay"
                start, cpu = time.perf_counter(), time.process_time()
                result = orp.replay(trace_id, mode="mock", store=store)
                replays.append(time.perf_counter() - start)
                replay_cpu.append(time.process_time() - cpu)
                assert result.outcome == "matched", result.to_dict()["first_divergence"]
    load = statistics.median(loads)
    total = statistics.median(replays)
    added = (total - load) / load
    cpu_load, cpu_total = statistics.median(load_cpu), statistics.median(replay_cpu)
    print(f"run: {len(run.steps)} steps")
    print(f"load_run                  : {load * 1000:8.1f} ms")
    print(f"mock replay (incl. load)  : {total * 1000:8.1f} ms")
    print(f"replay adds               : {added:.2f}x the load time  (target <= 1x)")
    print(
        f"process CPU, load / replay: {cpu_load * 1000:8.1f} / {cpu_total * 1000:.1f} ms "
        f"(replay adds {(cpu_total - cpu_load) / cpu_load:.2f}x; steadier than wall time on a busy machine)"
    )
    if phases is not None:
        phases.report(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
