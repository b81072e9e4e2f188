"""What the seccomp supervisor costs a live replay from step N, measured in one process.

Three measurements, each printed as a ratio of figures taken in the same run:

1. Its fixed cost per replay: a ``sandbox.Confinement`` under the supervised enforcement (the supervisor process
   started and ready, the filter installed on a fresh thread and its listener handed over) serving two empty
   functions, against the floor it cannot go under: starting the same Python with ``-I -S`` and nothing to run
   (the supervisor is such a process). Medians over ``--calls`` each.
2. A call the filter hands over: ``os.write`` of one byte to ``/dev/null`` (a descriptor above 2, so the kernel
   suspends it until the supervisor answers) on a thread under the filter, against the same write on a thread
   without it. Medians over ``--writes`` writes, in blocks.
3. A ``--steps``-step run (``benchmarks/replay_mock.py``'s agent) replayed live from step ``steps - 2`` (all but
   the last two steps answered from the recording, under the supervisor) with ``OTEL_REPLAY_SANDBOX=auto``
   against ``off``, alternating, ``--rounds`` each: the share the fixed cost takes of such a replay.

    python benchmarks/prefix_supervisor.py [--steps 1000] [--rounds 5] [--calls 30] [--writes 2000]

Targets (docs/performance.md): the fixed cost at most 2x one bare Python start (the supervisor is one Python
process; the rest is its imports, the fork that frees it from the replaying process's children, and the filter),
and under 5 % of a 1,000-step live replay from a step. Exit 1 when either is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from _table import print_rows, row
from replay_mock import long_agent  # the same 1,000-step agent (this script's folder is on sys.path)

import otel_replay as orp
from otel_replay.replay.safety import sandbox, seccomp
from otel_replay.semconv import ReplayMode
from otel_replay.storage.store import Store


def python_start(calls: int) -> float:
    """Median seconds to start this Python with ``-I -S`` and nothing to run."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fixed_cost(calls: int) -> tuple[float, float]:
    """Median seconds of a supervised confinement serving two empty functions (a replay's import, then its call),
    and of the plain call."""
    enforcement = sandbox.plan(ReplayMode.LIVE, allow_side_effects=False, setting="require", from_step=1)
    supervised, plain = [], []
    for _ in range(calls):
        start = time.perf_counter()
        with sandbox.Confinement(enforcement) as confinement:
            confinement.call(lambda: None)
            confinement.call(lambda: None)
            assert confinement.supervisor is not None
        supervised.append(time.perf_counter() - start)
        start = time.perf_counter()
        (lambda: None)()
        plain.append(time.perf_counter() - start)
    return statistics.median(supervised), statistics.median(plain)


def write_cost(writes: int) -> tuple[float, float]:
    """Median seconds per one-byte write to /dev/null on a thread under the filter, and on one without it."""
    block = 100
    fd = os.open(os.devnull, os.O_WRONLY)

    def blocks() -> list[float]:
        times = []
        for _ in range(max(writes // block, 1)):
            start = time.perf_counter()
            for _ in range(block):
                os.write(fd, b"x")
            times.append((time.perf_counter() - start) / block)
        return times

    enforcement = sandbox.plan(ReplayMode.LIVE, allow_side_effects=False, setting="require", from_step=1)
    try:
        with sandbox.Confinement(enforcement) as confinement:
            handed_over = statistics.median(confinement.call(blocks))
        found: list[float] = []
        thread = threading.Thread(target=lambda: found.extend(blocks()))
        thread.start()
        thread.join()
        return handed_over, statistics.median(found)
    finally:
        os.close(fd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--writes", type=int, default=2000)
    args = parser.parse_args()
    if not seccomp.available():
        print("this system offers no seccomp user notification on x86-64: nothing to measure")
        return 0
    floor = python_start(args.calls)
    cost, plain = fixed_cost(args.calls)
    handed_over, direct = write_cost(args.writes)
    with tempfile.TemporaryDirectory() as home:
        orp.configure(home=home, exporter="spool")
        long_agent(args.steps)
        orp.flush()
        with Store.open(home=home) as store:
            (summary,) = store.runs()
            from_step = max(args.steps - 2, 1)
            times: dict[str, list[float]] = {"off": [], "auto": []}
            live = {"mode": "live", "from_step": from_step, "reason": "benchmark", "store": store}
            orp.replay(summary.trace_id, **live)  # warm up
            for n in range(args.rounds):
                for setting in ("off", "auto") if n % 2 == 0 else ("auto", "off"):
                    os.environ["OTEL_REPLAY_SANDBOX"] = setting
                    start = time.perf_counter()
                    result = orp.replay(summary.trace_id, **live)
                    times[setting].append(time.perf_counter() - start)
                    assert result.outcome == "matched", result.to_dict()["first_divergence"]
                    assert (result.sandbox == "seccomp supervisor") is (setting == "auto"), result.sandbox
            os.environ.pop("OTEL_REPLAY_SANDBOX", None)
    off, on = statistics.median(times["off"]), statistics.median(times["auto"])
    added = cost - plain
    share = added / off
    met_floor, met_share = added <= 2 * floor, share < 0.05
    print(f"bare Python start (-I -S)              : {floor * 1000:8.2f} ms (median of {args.calls})")
    print(f"supervisor fixed cost per replay       : {added * 1000:8.2f} ms  ({added / floor:.2f}x the start)")
    print(f"write handed over / not               : {handed_over * 1e6:8.2f} us / {direct * 1e6:.2f} us")
    print(f"live from step {from_step}, off / auto : {off * 1000:8.1f} / {on * 1000:.1f} ms (median of {args.rounds})")
    print_rows(
        [
            row(
                "prefix supervisor: fixed cost per live replay from a step / one bare Python start",
                f"{added / floor:.2f}x ({added * 1000:.1f} ms)",
                "<= 2x",
                met_floor,
            ),
            row(
                f"prefix supervisor: fixed cost / a {args.steps:,}-step live replay from step {from_step}",
                f"{share * 100:.2f} %",
                "< 5 %",
                met_share,
            ),
            row(
                f"prefix supervisor: whole {args.steps:,}-step live replays from step {from_step}, supervised / off",
                f"{on / off:.3f}x",
                "none (the noise of two medians)",
            ),
            row(
                "prefix supervisor: a write the filter hands over / the same write on a thread without it",
                f"{handed_over / direct:.0f}x ({handed_over * 1e6:.1f} us)",
                "none (the kernel's round trip to the supervisor process)",
            ),
        ]
    )
    return 0 if met_floor and met_share else 1


if __name__ == "__main__":
    sys.exit(main())
