"""What the kernel sandbox costs an offline replay, measured in one process.

Two measurements, both printed as ratios of figures taken in the same run:

1. The sandbox's own fixed cost per replay: a ``sandbox.Confinement`` under the Landlock enforcement the kernel
   offers (a fresh thread that builds a ruleset, adds the rules for the temp folder, the home, the store and the
   export ports, sets ``no_new_privs`` and confines itself) running two empty functions (a replay's import,
   then its call, on that one thread), against the same empty function called directly. Median over
   ``--calls`` calls.
2. A ``--steps``-step mock replay (the run of ``benchmarks/replay_mock.py``'s agent) with
   ``OTEL_REPLAY_SANDBOX=auto`` against ``off``, alternating, ``--rounds`` each: the whole replay's wall time with
   and without the sandbox. On a shared 2-core machine the difference of two medians of about a second is mostly
   noise; the fixed cost in (1) is the figure to read, and (2) shows its share of a real replay.

    python benchmarks/sandbox_cost.py [--steps 1000] [--rounds 7] [--calls 300]

Targets (docs/performance.md): the sandbox adds under 5 ms per replay and under 5 % of a 1,000-step mock replay.
Exit 1 when the fixed cost misses either.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from _table import print_rows, row
from replay_mock import long_agent  # the same 1,000-step agent (this script's folder is on sys.path)

import otel_replay as orp
from otel_replay.replay.safety import landlock, sandbox
from otel_replay.semconv import ReplayMode
from otel_replay.storage.store import Store


def fixed_cost(calls: int) -> tuple[float, float]:
    """Median seconds of a confinement serving two empty functions (the agent's import, then its call), and of
    the plain call."""
    enforcement = sandbox.plan(ReplayMode.MOCK, allow_side_effects=False, setting="require")
    confined, plain = [], []
    for _ in range(calls):
        start = time.perf_counter()
        with sandbox.Confinement(enforcement) as confinement:  # a replay: the agent's import, then its call
            confinement.call(lambda: None)
            confinement.call(lambda: None)
        confined.append(time.perf_counter() - start)
        start = time.perf_counter()
        (lambda: None)()
        plain.append(time.perf_counter() - start)
    return statistics.median(confined), statistics.median(plain)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    abi = landlock.abi()
    if abi < 1:
        print("this kernel offers no Landlock: nothing to measure")
        return 0
    with tempfile.TemporaryDirectory() as home:
        orp.configure(home=home, exporter="spool")
        long_agent(args.steps)
        orp.flush()
        with Store.open(home=home) as store:
            (summary,) = store.runs()
            trace_id = summary.trace_id
            cost, plain = fixed_cost(args.calls)
            times: dict[str, list[float]] = {"off": [], "auto": []}
            orp.replay(trace_id, mode="mock", store=store)  # warm up
            for _ in range(args.rounds):
                for setting in ("off", "auto") if _ % 2 == 0 else ("auto", "off"):
                    os.environ["OTEL_REPLAY_SANDBOX"] = setting
                    start = time.perf_counter()
                    result = orp.replay(trace_id, mode="mock", store=store)
                    times[setting].append(time.perf_counter() - start)
                    assert result.outcome == "matched", result.to_dict()["first_divergence"]
                    assert (result.sandbox == "audit hooks only") is (setting == "off"), result.sandbox
            os.environ.pop("OTEL_REPLAY_SANDBOX", None)
    off, on = statistics.median(times["off"]), statistics.median(times["auto"])
    added = cost - plain
    share = added / off
    print(f"landlock ABI {abi}")
    print(f"sandbox fixed cost per replay : {added * 1000:8.3f} ms  (target < 5 ms)")
    print(f"mock replay, {args.steps} steps, off  : {off * 1000:8.1f} ms (median of {args.rounds})")
    print(f"mock replay, {args.steps} steps, auto : {on * 1000:8.1f} ms (median of {args.rounds})")
    print(f"fixed cost / replay           : {share * 100:8.3f} %   (target < 5 %)")
    print(f"auto / off, whole replays     : {on / off:8.3f}     (noise of two medians included)")
    print_rows(
        [
            row(
                f"sandbox: fixed cost of confining an offline replay / a {args.steps:,}-step mock replay",
                f"{share * 100:.2f} % ({added * 1000:.2f} ms)",
                "< 5 % (and < 5 ms)",
                added < 0.005 and share < 0.05,
            ),
            row(
                f"sandbox: whole {args.steps:,}-step mock replays, sandbox on / off",
                f"{on / off:.3f}x",
                "none (the noise of two medians)",
            ),
        ]
    )
    return 0 if added < 0.005 and share < 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
