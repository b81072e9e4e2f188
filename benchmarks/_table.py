"""The rows of the table in docs/performance.md, printed by every benchmark in the page's own shape.

Each benchmark ends its output with its rows of that table::

    | what | ratio | goal | command |
    |---|---|---|---|
    | recording: a tool step / a bare span | 1.24x | <= 1.5x: met | `python benchmarks/recording_overhead.py` |

so that a run's figures can be pasted into the page as they are. ``command`` is the command line the
benchmark was run with (``python benchmarks/NAME.py`` and its arguments).

Run as a script (``make bench``), it runs the benchmarks one after the other (the page's, or the ones named,
each with its arguments), passes their output through, and prints the whole table at the end; it exits 1 when
any benchmark did (a missed goal or a failed check)::

    python benchmarks/_table.py ['recording_overhead --rounds 9' replay_mock ...]

The modes that diagnose rather than measure a goal (``--phases``, ``--parts``, ``--against``, ``--recording-only``,
``--replay-run``) print no row.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterable

HEADER = "| what | ratio | goal | command |"
RULE = "|---|---|---|---|"

# What `make bench` runs, in this order: every row of the page but dedup_cost.py's, which needs a tree to
# compare with (`--before`).
BENCHMARKS = (
    "recording_overhead",
    "sdk_overhead",
    "langgraph_overhead",
    "langgraph_overhead --floor",
    "thread_carrying",
    "concurrency_recording",
    "ingest_throughput",
    "replay_mock",
    "sandbox_cost",
    "prefix_supervisor",
    "lab_throughput",
    "scale_load",
    "runs_listing",
    "start_time",
    "cli_start",
    "wire_proxy",
    "bisect_cost",
)


def command() -> str:
    """This benchmark's command line, as the page's command column writes it."""
    script = os.path.basename(sys.argv[0])
    return " ".join(["python", f"benchmarks/{script}", *(shlex.quote(a) for a in sys.argv[1:])])


def verdict(goal: str, met: bool | None) -> str:
    """The goal cell: the goal, then whether this run met it (None: a figure without a goal of its own)."""
    if met is None:
        return goal
    return f"{goal}: met" if met else f"{goal}: **not met**"


def row(what: str, ratio: str, goal: str, met: bool | None = None) -> tuple[str, str, str]:
    return what, ratio, verdict(goal, met)


def print_rows(rows: Iterable[tuple[str, str, str]]) -> None:
    """Print the table's header and one row per (what, ratio, goal), each with this run's command."""
    run = command()
    print()
    print(HEADER)
    print(RULE)
    for what, ratio, goal in rows:
        cells = [what, ratio, goal, f"`{run}`"]
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    sys.stdout.flush()


def is_row(line: str) -> bool:
    return line.startswith("| ") and line.rstrip().endswith(" |") and line.rstrip() not in (HEADER, RULE)


def main(names: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    rows: list[str] = []
    failed: list[str] = []
    for name in names or BENCHMARKS:
        first, *arguments = shlex.split(name)
        script = os.path.join(here, f"{first.removesuffix('.py')}.py")
        print(f"== python {' '.join([os.path.relpath(script), *arguments])}", flush=True)
        process = subprocess.Popen([sys.executable, script, *arguments], stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            if is_row(line):
                rows.append(line.rstrip("\n"))
        if process.wait() != 0:
            failed.append(f"{name} (exit {process.returncode})")
        sys.stdout.flush()
    print()
    print(HEADER)
    print(RULE)
    for line in rows:
        print(line)
    if failed:
        print(f"\nexited non-zero (a missed goal or a failed check): {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
