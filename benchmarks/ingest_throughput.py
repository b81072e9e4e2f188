"""Spool → chDB ingest throughput against a raw clickhouse-connect insert of the same rows, in one run.

Why it exists: the issue sets two targets for the embedded store's ingest: at least 0.4× the rate of a raw
clickhouse-connect insert of pre-built rows (the floor any Python writer pays), and at least 15,000 spans/s
on a 2-core machine. Both are measured here, in the same process and the same chDB engine, so the ratio
does not depend on the machine.

What is timed:

* ingest: ``Store.ingest()`` over sealed spool segments written by the real OTel SDK (TracerProvider +
  BatchSpanProcessor + SpoolExporter): read segments, check CRCs, parse OTLP protobuf, map to rows, insert,
  delete segments. Recording and encoding (the agent's side) are not timed.
* raw: ``client.insert`` of the very same rows, already built, into an identical empty table (the target
  ratio is against this plain call); printed too: the same insert with the cyclic GC paused, as the ingest
  pauses it, a stricter floor.

Each contender runs ``--rounds`` times, alternating, and its best time is reported (the machine may be
shared). Run: ``python benchmarks/ingest_throughput.py [--spans 60000] [--rounds 3]``. It never touches
``~/.otel-replay``. It ends with its row of the table in docs/performance.md and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _table import print_rows, row
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_replay.exporting.rows import INSERT_COLUMN_TYPES, INSERT_COLUMNS, rows_from_request
from otel_replay.exporting.spool import SpoolExporter, read_segment, sealed_segments
from otel_replay.storage import ddl
from otel_replay.storage.store import Store

PAYLOAD = '{"messages":[{"role":"user","content":"' + "x" * 900 + '"}],"model":"gpt-4o-mini"}'


def record_spans(spool: Path, spans: int) -> None:
    """Record ``spans`` spans (runs of 1 root + 7 steps; a ~1 KiB snapshot event on every other span)."""
    exporter = SpoolExporter(spool)
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(exporter, max_queue_size=200_000, max_export_batch_size=2048, schedule_delay_millis=200)
    )
    tracer = provider.get_tracer("otel_replay", "0.1.0")
    made = 0
    run = 0
    while made < spans:
        run += 1
        with tracer.start_as_current_span(
            "invoke_agent bench",
            attributes={
                "otel_replay.run.id": f"run-{run}",
                "otel_replay.run.kind": "original",
                "gen_ai.agent.name": "bench",
                "gen_ai.operation.name": "invoke_agent",
                "otel_replay.schema.version": "1.0",
            },
        ) as root:
            root.add_event(
                "otel_replay.snapshot.input", {"otel_replay.snapshot.payload": PAYLOAD, "otel_replay.snapshot.seq": 0}
            )
            made += 1
            for step in range(7):
                with tracer.start_as_current_span(
                    "execute_tool lookup",
                    attributes={
                        "otel_replay.step.index": step,
                        "otel_replay.step.kind": "tool",
                        "gen_ai.tool.name": "lookup",
                        "otel_replay.tool.risk": "read",
                        "gen_ai.usage.input_tokens": 123,
                        "otel_replay.model.cost_usd": 0.00042,
                        "gen_ai.response.finish_reasons": ["stop"],
                    },
                ) as span:
                    if step % 2 == 0:
                        span.add_event(
                            "otel_replay.snapshot.tool",
                            {"otel_replay.snapshot.payload": PAYLOAD, "otel_replay.snapshot.seq": step + 1},
                        )
                made += 1
    provider.shutdown()  # flushes the batch processor and seals the last segment


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--spans", type=int, default=60_000, help="spans to record and ingest (default 60000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each contender's best is reported")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="otel-replay-bench-"))
    try:
        home = work / "home"
        t0 = time.perf_counter()
        record_spans(home / "spool", args.spans)
        segments = sealed_segments(home / "spool")
        print(f"recorded {args.spans} spans into {len(segments)} spool segment(s) in {time.perf_counter() - t0:.1f}s")

        # The same rows, built before timing, for the raw insert.
        rows = []
        for path in segments:
            for payload in read_segment(path).payloads:
                rows.extend(rows_from_request(payload))

        saved = {path.name: path.read_bytes() for path in segments}

        with Store.open(home=home, ingest=False) as store:
            raw_table = "otel_traces_raw"
            for statement in ddl.render_ddl(table=raw_table, server_version=store.server_version()):
                store.client.command(statement)

            def raw_insert(*, pause_gc: bool) -> float:
                store.client.command(f"TRUNCATE TABLE {raw_table}")
                store.client.command(f"TRUNCATE TABLE {raw_table}_trace_id_ts")
                if pause_gc:
                    gc.disable()
                try:
                    t0 = time.perf_counter()
                    for start in range(0, len(rows), 20_000):
                        store.client.insert(
                            raw_table,
                            rows[start : start + 20_000],
                            column_names=list(INSERT_COLUMNS),
                            column_type_names=list(INSERT_COLUMN_TYPES),
                        )
                    return time.perf_counter() - t0
                finally:
                    gc.enable()

            def ingest() -> tuple[float, Any]:
                store.client.command("TRUNCATE TABLE otel_traces")
                store.client.command("TRUNCATE TABLE otel_traces_trace_id_ts")
                for name, data in saved.items():
                    (home / "spool" / name).write_bytes(data)
                t0 = time.perf_counter()
                report = store.ingest()
                return time.perf_counter() - t0, report

            # Alternate the contenders for a few rounds and keep each one's best: the machine may be shared.
            raw_times, raw_nogc_times, ingest_times = [], [], []
            for _ in range(args.rounds):
                raw_times.append(raw_insert(pause_gc=False))
                seconds, report = ingest()
                ingest_times.append(seconds)
                raw_nogc_times.append(raw_insert(pause_gc=True))
            raw_s, raw_nogc_s, ingest_s = min(raw_times), min(raw_nogc_times), min(ingest_times)
            stored = store.client.query("SELECT count() FROM otel_traces").result_rows[0][0]

        if report.spans != len(rows) or stored != len(rows):
            print(f"MISMATCH: ingested {report.spans}, stored {stored}, expected {len(rows)}", file=sys.stderr)
            return 1
        raw_rate = len(rows) / raw_s
        ingest_rate = len(rows) / ingest_s
        print(f"cpus: {os.cpu_count()}  spans: {len(rows)}  segments: {report.segments}  best of {args.rounds} rounds")
        print(f"raw clickhouse-connect insert of pre-built rows: {raw_rate:>10,.0f} spans/s ({raw_s:.2f}s)")
        print(f"spool -> chDB ingest (Store.ingest):             {ingest_rate:>10,.0f} spans/s ({ingest_s:.2f}s)")
        raw_nogc_rate = len(rows) / raw_nogc_s
        print(f"raw insert, cyclic GC paused (stricter floor):   {raw_nogc_rate:>10,.0f} spans/s ({raw_nogc_s:.2f}s)")
        print(f"ratio ingest / raw: {ingest_rate / raw_rate:.2f}  (targets: >= 0.40 and >= 15,000 spans/s)")
        print(f"ratio ingest / raw with GC paused: {ingest_rate / raw_nogc_rate:.2f}")
        ratio = ingest_rate / raw_rate
        print_rows(
            [
                row(
                    "ingest: spool -> chDB (`Store.ingest`) / a raw clickhouse-connect insert of the same rows",
                    f"{ratio:.2f} ({ingest_rate:,.0f} spans/s)",
                    ">= 0.4 (and >= 15,000 spans/s)",
                    ratio >= 0.4 and ingest_rate >= 15_000,
                )
            ]
        )
        return 0 if ratio >= 0.4 and ingest_rate >= 15_000 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
