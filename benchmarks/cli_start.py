"""CLI start time: ``otel-replay --help`` and ``otel-replay runs`` on an empty store, measured in one run.

Each figure is the median over ``--rounds`` fresh interpreters, timed from spawn to exit, each one running
the console script's entry point (``otel_replay.cli:main``) exactly as the installed ``otel-replay`` command
does. The rounds alternate the commands (rotating their order) so machine load hits all of them alike:

* ``python -c pass``: the interpreter alone, for scale (no target);
* ``otel-replay --version`` (no target);
* ``otel-replay --help``: target < 0.3 s;
* ``otel-replay runs`` with ``OTEL_REPLAY_HOME`` a fresh, empty folder (no store yet): target < 0.6 s; the
  benchmark also checks that the command created no store there (chDB was not started).

Bytecode is cached as an installed package's would be: ``PYTHONDONTWRITEBYTECODE`` is dropped and
``PYTHONPYCACHEPREFIX`` points at a temporary folder, warmed by one uncounted round.

    python benchmarks/cli_start.py [--rounds 11]

Prints one JSON document: each command's median wall time, all its times, its median CPU time (user +
system: what the command costs when other processes share the machine), and for the two with a target the
ratio of the median wall time to the target. Exit 1 when a target is missed (ratio >= 1) or ``runs`` created a store.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _table import print_rows, row

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from otel_replay.cli import main; sys.argv[0] = 'otel-replay'; main()"
TARGETS_S = {"help": 0.3, "runs_empty_store": 0.6}


def commands(python: str) -> dict[str, list[str]]:
    """The command line of each measured side."""
    return {
        "python_pass": [python, "-c", "pass"],
        "version": [python, "-c", ENTRY, "--version"],
        "help": [python, "-c", ENTRY, "--help"],
        "runs_empty_store": [python, "-c", ENTRY, "runs"],
    }


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawn to exit of ``command``, and the CPU seconds (user + system) it used; a failing
    command stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {out.returncode}:\n{out.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    sides = commands(sys.executable)
    times: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "OTEL_REPLAY_STORE", "OTEL_REPLAY_DEBUG")
        }
        env.update(
            OTEL_REPLAY_HOME=str(home),
            PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"),
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            COLUMNS="100",
        )
        names = list(sides)
        for name in names:  # warm the bytecode cache; not counted
            timed(sides[name], env)
        for round_no in range(args.rounds):
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                wall, used = timed(sides[name], env)
                times[name].append(wall)
                cpu[name].append(used)
        store_created = any(home.iterdir())
    report: dict[str, object] = {
        "benchmark": "cli_start",
        "command": "python benchmarks/cli_start.py" + (f" --rounds {args.rounds}" if args.rounds != 11 else ""),
        "python": platform.python_version(),
        "rounds": args.rounds,
        "runs_created_a_store": store_created,
    }
    missed = store_created
    for name, values in times.items():
        median = statistics.median(values)
        entry: dict[str, object] = {
            "median_s": round(median, 4),
            "cpu_median_s": round(statistics.median(cpu[name]), 4),
            "times_s": [round(v, 4) for v in values],
        }
        if name in TARGETS_S:
            ratio = median / TARGETS_S[name]
            entry.update(target_s=TARGETS_S[name], ratio=round(ratio, 3), met=ratio < 1)
            missed = missed or ratio >= 1
        report[name] = entry
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    base = statistics.median(times["python_pass"])
    what = {"help": "`otel-replay --help`", "runs_empty_store": "`otel-replay runs` in an empty home"}
    table = []
    for name, target in TARGETS_S.items():
        median = statistics.median(times[name])
        met = median < target and not (name == "runs_empty_store" and store_created)
        table.append(
            row(
                f"CLI start: {what[name]} / `python -c pass`",
                f"{median / base:.1f}x ({median:.2f} s)",
                f"< {target} s",
                met,
            )
        )
    print_rows(table)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
