"""Start time: what ``import otel_replay as orp; orp.instrument()`` and otel-replay's ``opentelemetry-instrument``
entry points add to the start of a Python program, with every SDK extra installed, measured in one run.

Each side is a fresh interpreter, timed from spawn to exit; the rounds alternate the sides (rotating their
order), and each figure is the median over the rounds:

* ``python -c pass`` (the baseline);
* ``python -c "import otel_replay as orp; orp.instrument()"``;
* for comparison, the same followed by ``import openai, anthropic, langgraph.pregel`` (what importing the SDKs
  themselves costs: what ``orp.instrument()`` used to add before it armed post-import hooks instead);
* ``opentelemetry-instrument python -c pass`` with otel-replay's entry points disabled, and with them enabled
  (``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``). The entry points are this checkout's (``pyproject.toml``, put
  first on the path as distribution metadata, whatever is installed). Other installed instrumentors are
  disabled on both sides unless ``--keep-others``: they import their SDKs themselves, which is not
  otel-replay's cost.

    python benchmarks/start_time.py [--rounds 9] [--keep-others]

Target (issue 13): each of the two adds < 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

from _table import print_rows, row

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.3
INSTRUMENT = "import otel_replay as orp; orp.instrument()"
EAGER = INSTRUMENT + "; import openai, anthropic, langgraph.pregel"


def source_tree_metadata(folder: Path) -> tuple[Path, list[str]] | None:
    """Distribution metadata of this checkout (name, version, entry points from ``pyproject.toml``) in
    ``folder``, and the names of its instrumentor entry points; None before Python 3.11 (no ``tomllib``)."""
    try:
        import tomllib
    except ImportError:
        return None

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = folder / f"otel_replay-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items()) + "\n"
            for group, points in project["entry-points"].items()
        )
    )
    return folder, sorted(project["entry-points"].get("opentelemetry_instrumentor", {}))


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{out.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--keep-others",
        action="store_true",
        help="leave the other installed instrumentors enabled on both launcher sides",
    )
    args = parser.parse_args()
    python = sys.executable
    launcher = shutil.which("opentelemetry-instrument", path=os.path.dirname(python))
    with tempfile.TemporaryDirectory() as tmp:
        found = source_tree_metadata(Path(tmp) / "meta")
        if found is None:
            launcher = None  # this checkout's entry points cannot be read: the launcher sides are skipped
        meta, ours = found or (ROOT, [])
        others = sorted({e.name for e in entry_points(group="opentelemetry_instrumentor")} - set(ours))
        env = {
            **os.environ,
            "OTEL_REPLAY_HOME": str(Path(tmp) / "home"),
            "PYTHONPATH": os.pathsep.join([str(meta), str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
        }
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        disabled = [] if args.keep_others else others
        sides: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([python, "-c", "pass"], env),
            "orp.instrument()": ([python, "-c", INSTRUMENT], env),
            "orp.instrument() + import the SDKs": ([python, "-c", EAGER], env),
        }
        if launcher is not None:
            sides["opentelemetry-instrument, without ours"] = (
                [launcher, python, "-c", "pass"],
                {**env, "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ",".join(disabled + ours) or "none"},
            )
            sides["opentelemetry-instrument, with ours"] = (
                [launcher, python, "-c", "pass"],
                {**env, "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ",".join(disabled) or "none"},
            )
        names = list(sides)
        for name in names:  # warm the file system caches and the bytecode of every side once
            timed(*sides[name])
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(args.rounds):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                times[name].append(timed(*sides[name]))
    median = {name: statistics.median(values) for name, values in times.items()}
    base = median["python -c pass"]
    print(
        f"{args.rounds} rounds, medians; other instrumentors "
        f"{'enabled' if args.keep_others else 'disabled'}: {', '.join(others) or 'none'}"
    )
    for name in names:
        print(f"{name:40s}: {median[name]:6.3f} s")
    added = median["orp.instrument()"] - base
    print(
        f"orp.instrument() adds                   : {added:6.3f} s  ({median['orp.instrument()'] / base:.2f}x "
        f"python -c pass; target < {TARGET_S} s)"
    )
    print(f"importing the SDKs would add            : {median['orp.instrument() + import the SDKs'] - base:6.3f} s")
    ok = added < TARGET_S
    table = [
        row(
            'start: `python -c "import otel_replay as orp; orp.instrument()"` / `python -c pass`',
            f"{median['orp.instrument()'] / base:.2f}x (+{added:.3f} s)",
            f"adds < {TARGET_S} s",
            added < TARGET_S,
        )
    ]
    if launcher is not None:
        without = median["opentelemetry-instrument, without ours"]
        with_ours = median["opentelemetry-instrument, with ours"]
        print(
            f"otel-replay's entry points add          : {with_ours - without:6.3f} s  ({with_ours / without:.2f}x "
            f"the launcher without them; target < {TARGET_S} s)"
        )
        ok = ok and with_ours - without < TARGET_S
        table.append(
            row(
                "start: `opentelemetry-instrument python -c pass` with otel-replay's entry points / without them",
                f"{with_ours / without:.2f}x ({with_ours - without:+.3f} s)",
                f"adds < {TARGET_S} s",
                with_ours - without < TARGET_S,
            )
        )
    else:
        print(
            "opentelemetry-instrument is not installed next to this Python (or Python < 3.11): launcher sides skipped"
        )
    print_rows(table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
