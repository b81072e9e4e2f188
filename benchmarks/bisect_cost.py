"""A bisect's cost against the replays it needs: a 64-commit bisect of one regression case (``tests/bisect_repo``:
the agent recorded at the first of 65 commits, its prompt changed at commit ``--break``), run through
:func:`otel_replay.bisect.bisect`, against seven replays of that case, each as a bisect step runs one (a child
process replaying the case at the checked-out commit, no worktree), measured in the same run.

    python benchmarks/bisect_cost.py [--break 41] [--rounds 3]

Goal (issue "bisect"): the whole bisect, worktrees included, within seven replays' time + 10 % (ratio <= 1.10).
After the JSON report, the row of the table in docs/performance.md; exit 1 when the goal is missed or the
bisect does not find the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _table import print_rows, row
from bisect_repo import _git, make_repo, record

GOAL = 1.10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--break", dest="break_at", type=int, default=41, help="the commit that breaks the case")
    parser.add_argument("--rounds", type=int, default=3, help="single replays timed (the median is used)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-bisect-") as tmp:
        os.environ["HOME"] = tmp
        os.environ["OTEL_REPLAY_HOME"] = str(Path(tmp) / ".otel-replay")
        repo = Path(tmp) / "repo"
        hashes = make_repo(repo, 65, break_at=args.break_at, no_import=None, temperature_at=None)
        _git(repo, "checkout", "-q", hashes[0])
        trace_id = record(repo)
        case = Path(tmp) / "support.case.json"
        subprocess.run(
            [sys.executable, "-m", "otel_replay.cli", "case", "export", trace_id, "-o", str(case)],
            check=True,
            capture_output=True,
        )
        from otel_replay.bisect import bisect
        from otel_replay.bisect.run import _run_step

        spec = {"target": "case", "cases": [str(case)], "mode": "deterministic", "bisect_id": "bench", "revision": "x"}
        singles = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            said = _run_step(repo, spec)
            singles.append(time.perf_counter() - started)
            assert said["verdict"] == "good", said
        one = statistics.median(singles)
        _git(repo, "checkout", "-q", "main")
        os.chdir(repo)
        started = time.perf_counter()
        result = bisect(good=hashes[0], bad="main", cases=[case])
        total = time.perf_counter() - started
    found = result.first_bad is not None and result.first_bad.id == hashes[args.break_at - 1]
    ratio = total / (7 * one)
    report = {
        "candidates": result.candidates,
        "steps": result.replays,
        "found": found,
        "bisect_s": round(total, 3),
        "one_replay_s": round(one, 3),
        "ratio_to_7_replays": round(ratio, 3),
    }
    report["message"] = result.message
    print(json.dumps(report, indent=2))
    met = ratio <= GOAL and found
    print_rows([row("bisect: 64 commits, one case / 7 replays of it", f"{ratio:.2f}x", f"<= {GOAL:.2f}x", met)])
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
