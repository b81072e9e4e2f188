"""Loading one 1,000-span run by trace id from a 10,000-span store and from a 1,000,000-span store.

Why it exists: finding a run must not slow down as the store grows. The Collector exporter's layout keeps a
trace-id lookup table (``otel_traces_trace_id_ts``) so that a trace is read from the one time window it lives
in; this benchmark checks that ``Store.load_run`` of the same 1,000-span run costs about the same in a small
and in a large store.

What it builds (in a temporary folder, removed at the end; ``~/.otel-replay`` is never touched):

* the target run: recorded for real with ``@otel_replay.agent`` / ``@model`` / ``@tool`` (1 root + 999
  steps, a snapshot event on every span) into a spool, its rows mapped by the ingest's own mapping, and its
  timestamps moved to the middle of the stores' 30-day window;
* filler runs of varied sizes (2 to 1,000 spans, most small; several agents and services, some failed),
  cloned from the target run's spans with fresh ids and times spread over 30 days, so every span carries the
  attributes and snapshot payloads a recorded span carries. They are inserted in time order, in batches of
  200,000 rows through ``Store.insert_rows``, as a steady stream of runs would arrive; the target run is
  inserted when its time comes.

Both stores are embedded chDB stores, built and then measured each in its own subprocess (chDB holds one
embedded store per process). After a build, the script waits (up to a minute) for background merges to
finish, as they would on a store that has been running for a while, and reports the part count.

What is timed, in ``--rounds`` rounds alternating small / large (each round is a fresh process: 2 warm-up
loads, then ``--loads`` timed loads; each round reports its median): ``Store.load_spans(trace_id)`` (lookup
table, then the bounded read, then rows → records) and ``Store.load_run(trace_id)`` (the same plus
rebuilding the run). The ratio is the median of the per-round ratios large / small.

    python benchmarks/scale_load.py [--small 10000] [--large 1000000] [--rounds 3] [--loads 9]

Targets (docs/performance.md): large-store load <= 2x the small-store load, and under 250 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _table import print_rows, row

DAY_NS = 86_400 * 1_000_000_000
WINDOW_DAYS = 30
TARGET_SPANS = 1_000
BATCH_ROWS = 200_000
AGENTS = ("support-agent", "research-agent", "billing-agent", "triage-agent", "travel-agent", "sql-agent")
SERVICES = ("otel-replay-agent", "support-svc", "research-svc")
MODELS = ("gpt-4o-mini", "claude-sonnet", "bench-1")
TOOLS = ("lookup_order", "search_kb", "refund", "fetch")
# Spans per filler run (root included) and how often each size occurs: most runs are short.
RUN_SIZES = (2, 4, 6, 10, 20, 50, 200, 1000)
RUN_WEIGHTS = (20, 25, 20, 15, 10, 6, 3, 1)
PAYLOAD_KEY = "otel_replay.snapshot.payload"
_UNIQUE = re.compile(r"\b[0-9a-f]{64}\b|\bcall_[0-9a-f]{16}\b")  # hashes and call ids differ in every span


# ---------------------------------------------------------------------------------------- target run


def record_target(home: Path, spans: int = TARGET_SPANS) -> None:
    """Record one run of ``spans`` spans (root + model/tool steps) with the real API into ``home``'s spool."""
    import otel_replay as orp

    @orp.model("plan", provider="openai", model="gpt-4o-mini")
    def plan(step: int, question: str) -> dict:
        return {
            "tool": "lookup_order",
            "arguments": {"order_id": f"o-{step}"},
            "usage": {"input_tokens": 412, "output_tokens": 38},
        }

    @orp.tool("lookup_order", risk="read")
    def lookup_order(order_id: str) -> dict:
        return {
            "order_id": order_id,
            "status": "shipped",
            "carrier": "DHL",
            "eta": "2026-12-03",
            "items": [{"sku": "KT-104", "qty": 1, "note": "replacement kettle"}],
        }

    @orp.agent("support-agent")
    def support_agent(question: str) -> str:
        for step in range(spans - 1):
            if step % 2 == 0:
                decision = plan(step, question)
            else:
                lookup_order(decision["arguments"]["order_id"])
        return "Your replacement kettle ships with DHL and arrives on 3 December."

    orp.configure(home=home, exporter="spool")
    support_agent("Where is my replacement kettle? It shipped last week to the Lyon address.")
    orp.flush()


def target_rows(spool: Path) -> list[tuple[Any, ...]]:
    """Insert rows of the recorded target run, read from its spool with the ingest's mapping."""
    from otel_replay.exporting.rows import rows_from_request
    from otel_replay.exporting.spool import read_segment, sealed_segments

    rows: list[tuple[Any, ...]] = []
    for path in sealed_segments(spool):
        for payload in read_segment(path).payloads:
            rows.extend(rows_from_request(payload))
    return rows


def shifted(row: tuple[Any, ...], delta_ns: int) -> tuple[Any, ...]:
    """``row`` with its span and event timestamps moved by ``delta_ns``."""
    return (row[0] + delta_ns, *row[1:15], [t + delta_ns for t in row[15]], *row[16:])


# ----------------------------------------------------------------------------------------- filler runs


class FillerRuns:
    """Runs cloned from a recorded run's spans: fresh ids, times, agents, services and statuses.

    Attribute maps and snapshot payloads are the recorded ones (the run id, agent, step index and step count
    are set per span), so stored rows are as wide and as compressible as recorded ones.
    """

    def __init__(self, template: list[tuple[Any, ...]], *, seed: int) -> None:
        from otel_replay import semconv

        self.rng = random.Random(seed)
        self.root = next(r for r in template if not r[3])
        self.model = next(r for r in template if r[3] and r[11].get(semconv.STEP_KIND) == "model")
        self.tool = next(r for r in template if r[3] and r[11].get(semconv.STEP_KIND) == "tool")
        self.semconv = semconv
        self.resources = {service: dict(self.root[8], **{"service.name": service}) for service in SERVICES}
        self.payloads = {id(row): self._payload_template(row) for row in (self.model, self.tool)}

    @staticmethod
    def _payload_template(row: tuple[Any, ...]) -> tuple[str, list[str], list[str]]:
        """The row's snapshot payload as a format string whose hashes and call ids are fields, the attribute
        keys that hold those hashes, and the values themselves."""
        payload = row[17][0][PAYLOAD_KEY]
        values = list(dict.fromkeys(_UNIQUE.findall(payload)))
        text = payload.replace("{", "{{").replace("}", "}}")
        for index, value in enumerate(values):
            text = text.replace(value, f"{{{index}}}")
        keys = [key for key, value in row[11].items() if value in values]
        return text, keys, values

    def _id(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def run(
        self,
        start_ns: int,
        size: int,
        *,
        agent: str | None = None,
        failed: bool | None = None,
    ) -> list[tuple[Any, ...]]:
        """Rows of one run of ``size`` spans starting at ``start_ns`` (root first)."""
        sc, rng = self.semconv, self.rng
        agent = agent or rng.choice(AGENTS)
        failed = rng.random() < 0.05 if failed is None else failed
        service = SERVICES[AGENTS.index(agent) % len(SERVICES)] if agent in AGENTS else SERVICES[0]
        resource = self.resources.get(service) or dict(self.root[8], **{"service.name": service})
        trace_id, root_id = self._id(128), self._id(64)
        model, tool = rng.choice(MODELS), rng.choice(TOOLS)
        rows = []
        at = start_ns + 1_000_000
        for index in range(size - 1):
            template = self.model if index % 2 == 0 else self.tool
            attrs = dict(template[11])
            attrs[sc.STEP_INDEX] = str(index)
            text, hash_keys, old = self.payloads[id(template)]
            fresh = [self._id(256) if len(value) == 64 else "call_" + self._id(64) for value in old]
            for key in hash_keys:
                attrs[key] = fresh[old.index(template[11][key])]
            event = dict(template[17][0])
            event[PAYLOAD_KEY] = text.format(*fresh)
            event[sc.SNAPSHOT_SHA256] = self._id(256)
            if template is self.model:
                attrs[sc.GEN_AI_REQUEST_MODEL] = model
                name = f"chat {model}"
            else:
                attrs[sc.GEN_AI_TOOL_NAME] = tool
                attrs[sc.STEP_NAME] = tool
                name = f"execute_tool {tool}"
            duration = rng.randrange(2_000_000, 900_000_000 if template is self.model else 80_000_000)
            rows.append(
                (
                    at,
                    trace_id,
                    self._id(64),
                    root_id,
                    "",
                    name,
                    template[6],
                    service,
                    resource,
                    template[9],
                    template[10],
                    attrs,
                    duration,
                    "Ok" if template is self.model else "Unset",
                    "",
                    [at + duration - 1000],
                    template[16],
                    [event],
                    [],
                    [],
                    [],
                    [],
                )
            )
            at += duration + rng.randrange(100_000, 5_000_000)
        if failed and rows:
            last = rows[-1]
            rows[-1] = (*last[:13], "Error", "TimeoutError: upstream did not answer", *last[15:])
        root_attrs = dict(self.root[11])
        root_attrs.update(
            {
                sc.RUN_ID: self._id(128),
                sc.GEN_AI_AGENT_NAME: agent,
                sc.RUN_STEP_COUNT: str(size - 1),
                sc.RUN_ENTRYPOINT: f"app.agents:{agent}",
            }
        )
        duration = at - start_ns
        root = (
            start_ns,
            trace_id,
            root_id,
            "",
            "",
            f"invoke_agent {agent}",
            self.root[6],
            service,
            resource,
            self.root[9],
            self.root[10],
            root_attrs,
            duration,
            "Error" if failed else "Unset",
            "TimeoutError: upstream did not answer" if failed else "",
            [start_ns, at - 1000],
            self.root[16],
            self.root[17],
            [],
            [],
            [],
            [],
        )
        return [root, *rows]

    def runs(self, total_spans: int, first_ns: int, last_ns: int) -> Iterator[list[tuple[Any, ...]]]:
        """Runs of varied sizes holding ``total_spans`` spans in all, in start-time order over the window."""
        sizes = []
        left = total_spans
        while left > 0:
            size = min(self.rng.choices(RUN_SIZES, RUN_WEIGHTS)[0], left)
            if left - size == 1:  # never leave a single span: a run needs its root and a step
                size += 1
            sizes.append(size)
            left -= size
        starts = sorted(self.rng.randrange(first_ns, last_ns) for _ in sizes)
        for start, size in zip(starts, sizes, strict=True):
            yield self.run(start, size)


# ---------------------------------------------------------------------------------------------- workers


def _store(folder: Path) -> Any:
    from otel_replay.storage.store import Store

    return Store.open(f"chdb://{folder / 'store'}", home=folder, ingest=False)


def _active_parts(store: Any) -> int:
    result = store.client.query(
        "SELECT count() FROM system.parts WHERE active AND database = {db:String} AND table = {t:String}",
        parameters={"db": store.database, "t": store.table},
    )
    return int(result.result_rows[0][0])


def settle_merges(store: Any, timeout: float = 60.0) -> None:
    """Wait until no merge runs on the store's tables and the part count stops falling (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    last = -1
    while time.monotonic() < deadline:
        merging = store.client.query(
            "SELECT count() FROM system.merges WHERE database = {db:String}", parameters={"db": store.database}
        ).result_rows[0][0]
        parts = _active_parts(store)
        if not merging and parts == last:
            return
        last = parts
        time.sleep(2.0)


def build_worker(folder: Path, spool: Path, spans: int, seed: int) -> dict[str, Any]:
    """Build one store of ``spans`` spans (target run included) in ``folder``; returns its statistics."""
    target = target_rows(spool)
    newest = time.time_ns()
    first = newest - WINDOW_DAYS * DAY_NS
    middle = first + WINDOW_DAYS * DAY_NS // 2
    target = [shifted(row, middle - min(r[0] for r in target)) for row in target]
    target.sort(key=lambda row: row[0])
    factory = FillerRuns(target, seed=seed)
    started = time.perf_counter()
    inserted = 0
    pending: list[tuple[Any, ...]] = []
    with _store(folder) as store:
        placed = False
        for rows in factory.runs(spans - len(target), first, newest):
            if not placed and rows[0][0] >= middle:
                pending.extend(target)
                placed = True
            pending.extend(rows)
            if len(pending) >= BATCH_ROWS:
                inserted += store.insert_rows(pending)
                pending = []
        if not placed:
            pending.extend(target)
        inserted += store.insert_rows(pending)
        build_s = time.perf_counter() - started
        settle_merges(store)
        count, traces = store.client.query("SELECT count(), uniqExact(TraceId) FROM otel_traces").result_rows[0]
        parts = _active_parts(store)
        size = store.client.query(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'otel_traces'"
        ).result_rows[0][0]
    return {
        "spans": int(count),
        "inserted": inserted,
        "traces": int(traces),
        "parts": parts,
        "mib": int(size) / 2**20,
        "build_s": build_s,
        "trace_id": target[0][1],
    }


def measure_worker(folder: Path, trace_id: str, loads: int) -> dict[str, Any]:
    """Median times of ``load_spans`` and ``load_run`` of ``trace_id`` after two warm-up loads."""
    with _store(folder) as store:
        for _ in range(2):
            run = store.load_run(trace_id)
        spans_times, run_times = [], []
        for _ in range(loads):
            t0 = time.perf_counter()
            spans = store.load_spans(trace_id)
            spans_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run = store.load_run(trace_id)
            run_times.append(time.perf_counter() - t0)
    return {
        "load_spans": statistics.median(spans_times),
        "load_run": statistics.median(run_times),
        "spans": len(spans),
        "steps": len(run.steps),
    }


def _worker(*args: str) -> dict[str, Any]:
    """Run this script as a worker subprocess (its own chDB store) and return its JSON answer."""
    done = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--small", type=int, default=10_000, help="spans in the small store (default 10000)")
    parser.add_argument("--large", type=int, default=1_000_000, help="spans in the large store (default 1000000)")
    parser.add_argument("--rounds", type=int, default=3, help="measuring rounds per store, alternating")
    parser.add_argument("--loads", type=int, default=9, help="timed loads per round (median reported)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "build":
            answer = build_worker(Path(rest[0]), Path(rest[1]), int(rest[2]), int(rest[3]))
        else:
            answer = measure_worker(Path(rest[0]), rest[1], int(rest[2]))
        print(json.dumps(answer))
        return 0

    work = Path(tempfile.mkdtemp(prefix="otel-replay-scale-"))
    try:
        source = work / "source"
        t0 = time.perf_counter()
        record_target(source)
        print(f"recorded the target run ({TARGET_SPANS} spans) in {time.perf_counter() - t0:.1f}s")
        stores = {"small": (work / "small", args.small), "large": (work / "large", args.large)}
        trace_id = ""
        for label, (folder, spans) in stores.items():
            t0 = time.perf_counter()
            stats = _worker("build", str(folder), str(source / "spool"), str(spans), str(args.seed))
            trace_id = stats["trace_id"]
            print(
                f"{label:5} store: {stats['spans']:>9,} spans, {stats['traces']:>6,} traces, "
                f"{stats['parts']:>3} parts, {stats['mib']:7.1f} MiB on disk; inserted in {stats['build_s']:.1f}s, "
                f"ready in {time.perf_counter() - t0:.1f}s"
            )
            if stats["spans"] != spans:
                print(f"MISMATCH: {label} store holds {stats['spans']} spans, expected {spans}", file=sys.stderr)
                return 1
        results: dict[str, list[dict[str, Any]]] = {"small": [], "large": []}
        for _ in range(args.rounds):
            for label, (folder, _spans) in stores.items():
                results[label].append(_worker("measure", str(folder), trace_id, str(args.loads)))
        for label in results:
            for answer in results[label]:
                if answer["spans"] != TARGET_SPANS or answer["steps"] != TARGET_SPANS - 1:
                    print(
                        f"MISMATCH: {label} store loaded {answer['spans']} spans / {answer['steps']} steps",
                        file=sys.stderr,
                    )
                    return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"cpus: {os.cpu_count()}  target run: {TARGET_SPANS} spans, trace {trace_id}  "
        f"{args.rounds} rounds x {args.loads} loads (median per round)"
    )
    verdicts = []
    rows = []
    for what in ("load_spans", "load_run"):
        small = [answer[what] for answer in results["small"]]
        large = [answer[what] for answer in results["large"]]
        ratio = statistics.median(b / a for a, b in zip(small, large, strict=False))
        large_ms = statistics.median(large) * 1000
        print(
            f"{what:10} small store ({args.small:>9,} spans): {statistics.median(small) * 1000:7.1f} ms   "
            f"rounds: {', '.join(f'{s * 1000:.1f}' for s in small)}"
        )
        print(
            f"{what:10} large store ({args.large:>9,} spans): {large_ms:7.1f} ms   "
            f"rounds: {', '.join(f'{s * 1000:.1f}' for s in large)}"
        )
        ok = ratio <= 2.0 and large_ms < 250
        verdicts.append(ok)
        print(f"{what:10} large / small: {ratio:.2f}x  (target <= 2x and < 250 ms): {'PASS' if ok else 'FAIL'}")
        rows.append(
            row(
                f"scale: `{what}` of one 1,000-span run, {args.large:,}-span store / {args.small:,}-span store",
                f"{ratio:.2f}x ({large_ms:.0f} ms)",
                "<= 2x, and under 250 ms",
                ok,
            )
        )
    print_rows(rows)
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
