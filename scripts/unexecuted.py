"""List the package's modules and public functions that a coverage run of the test suite never executed.

Usage: ``make coverage`` (runs the suite under coverage, then this script), or
``python scripts/unexecuted.py coverage.json`` on a JSON report of your own (coverage >= 7.5, which reports
functions). Exit 1 when something is listed.

A function counts as executed when any of its statements ran. Public means no part of its qualified name
starts with ``_`` (dunder methods count as public). Code that runs only inside the side-effect guard's audit
hook (``otel_replay/replay/safety/guard.py`` and the checks in ``replay/safety/effects.py``) is never seen by coverage:
CPython does not trace audit hooks. The guard's tests in ``tests/adversarial/`` are what show that code runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _public(qualname: str) -> bool:
    parts = qualname.split(".")
    return all(not part.startswith("_") or (part.startswith("__") and part.endswith("__")) for part in parts)


def unexecuted(report: dict) -> list[str]:
    """``module`` or ``module: function`` for every module and public function with no executed statement."""
    found: list[str] = []
    for path, info in sorted(report["files"].items()):
        module = Path(path).as_posix()
        if info["summary"]["num_statements"] and not info["summary"]["covered_lines"]:
            found.append(module)
            continue
        for qualname, function in info.get("functions", {}).items():
            summary = function["summary"]
            if qualname and _public(qualname) and summary["num_statements"] and not summary["covered_lines"]:
                found.append(f"{module}: {qualname}")
    return found


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else "coverage.json")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the coverage report {path}: {exc}", file=sys.stderr)
        return 2
    found = unexecuted(report)
    for line in found:
        print(line)
    print(f"{len(found)} module(s) or public function(s) never executed", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
