"""The Store on the real engine (chDB through clickhouse-connect): schema, lookup by trace id, run rows, lock."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from fake_clock import FakeClock
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from otel_replay import settings
from otel_replay.errors import InvalidTraceIdError, StoreBusyError, StoreError, StoreUnavailableError
from otel_replay.exporting.rows import INSERT_COLUMNS
from otel_replay.exporting.spool import SpoolExporter
from otel_replay.records import EventRecord, LinkRecord, SpanRecord
from otel_replay.storage import ddl
from otel_replay.storage import lock as lock_module
from otel_replay.storage.store import Store


def record_run(home, agent: str = "support", *, error: bool = False, kind: str | None = None) -> str:
    """Record one run with the real SDK into ``home``'s spool; returns its trace id."""
    exporter = SpoolExporter(home / "spool")
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("otel_replay", "0.1.0")
    attributes = {"otel_replay.run.id": f"run-{time.time_ns()}", "gen_ai.agent.name": agent}
    if kind:
        attributes["otel_replay.run.kind"] = kind
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attributes) as root:
        root.add_event("otel_replay.snapshot.input", {"otel_replay.snapshot.payload": '{"q":"hi"}'})
        with tracer.start_as_current_span("execute_tool lookup", attributes={"otel_replay.step.index": 0}):
            pass
        if error:
            root.set_status(Status(StatusCode.ERROR, "failed"))
    provider.shutdown()
    return format(root.get_span_context().trace_id, "032x")


def make_span(
    trace_id: str,
    span_id: str,
    *,
    start: int,
    name: str = "op",
    parent: str = "",
    status: str = "Unset",
    attributes: dict[str, str] | None = None,
) -> SpanRecord:
    return SpanRecord(
        timestamp_ns=start,
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        trace_state="",
        span_name=name,
        span_kind="Internal",
        service_name="svc",
        resource_attributes={"service.name": "svc"},
        scope_name="s",
        scope_version="1",
        span_attributes=attributes or {},
        duration_ns=1_000,
        status_code=status,
        status_message="",
    )


def test_open_creates_the_exporter_schema_and_ingests_the_spool(home):
    trace_id = record_run(home)
    with Store.open() as store:
        assert store.last_ingest.spans == 2
        columns = [row[0] for row in store.client.query("DESCRIBE TABLE otel_traces").result_rows]
        assert tuple(columns) == INSERT_COLUMNS
        tables = {row[0] for row in store.client.query("SHOW TABLES").result_rows}
        assert {"otel_traces", "otel_traces_trace_id_ts", "otel_traces_trace_id_ts_mv"} <= tables
        spans = store.load_spans(trace_id)
        assert [s.span_name for s in spans] == ["invoke_agent support", "execute_tool lookup"]
        assert spans[0].events[0].name == "otel_replay.snapshot.input"
        assert store.has_trace(trace_id)
        assert not store.has_trace("f" * 32)
        assert store.load_spans("f" * 32) == []
    assert (home / "store").is_dir()


def test_span_rows_round_trip_mapping_insert_load(home):
    tid = "ab" * 16
    original = SpanRecord(
        timestamp_ns=1_700_000_000_123_456_789,
        trace_id=tid,
        span_id="cd" * 8,
        parent_span_id="",
        trace_state="a=b",
        span_name="invoke_agent x",
        span_kind="Server",
        service_name="svc",
        resource_attributes={"service.name": "svc", "host": "h"},
        scope_name="scope",
        scope_version="2",
        span_attributes={"z": "1", "a": '["<x>"]', "m": "é\n"},
        duration_ns=987_654_321,
        status_code="Error",
        status_message="boom",
        events=(
            EventRecord(timestamp_ns=1_700_000_000_200_000_001, name="e2", attributes={"k": "v"}),
            EventRecord(timestamp_ns=1_700_000_000_100_000_000, name="e1"),
        ),
        links=(LinkRecord(trace_id="11" * 16, span_id="22" * 8, trace_state="t", attributes={"l": "1"}),),
    )
    child = make_span(tid, "ef" * 8, start=1_700_000_000_500_000_000, parent="cd" * 8)
    with Store.open() as store:
        assert store.insert_spans([original, child]) == 2
        loaded = store.load_spans(tid)
    assert loaded == [original, child]
    assert list(loaded[0].span_attributes) == ["a", "m", "z"]


def test_trace_lookup_goes_through_the_trace_id_table(home):
    tid = "12" * 16
    with Store.open() as store:
        store.insert_spans(
            [
                make_span(tid, "01" * 8, start=1_700_000_000_000_000_000),
                make_span(tid, "02" * 8, start=1_700_000_100_900_000_000),
            ]
        )  # 100 s later
        start, end = store.client.query(
            "SELECT min(Start), max(End) FROM otel_traces_trace_id_ts WHERE TraceId = {t:String}", parameters={"t": tid}
        ).result_rows[0]
        assert (end - start).total_seconds() == 100
        assert len(store.load_spans(tid)) == 2  # the last span starts within the final second: End + 1 covers it
        store.client.command("TRUNCATE TABLE otel_traces_trace_id_ts")
        assert store.load_spans(tid) == []  # no lookup row, no scan of otel_traces
        assert not store.has_trace(tid)


def test_sql_looking_values_stay_bound_parameters(home):
    with Store.open() as store:
        store.insert_spans(
            [
                make_span(
                    "34" * 16,
                    "01" * 8,
                    start=1_700_000_000_000_000_000,
                    name="invoke_agent o'b",
                    attributes={"gen_ai.agent.name": "o'b\" --", "otel_replay.run.id": "r"},
                )
            ]
        )
        with pytest.raises(InvalidTraceIdError):
            store.load_spans("' OR 1=1; DROP TABLE otel_traces; --")
        assert store.run_rows(agent="x' OR '1'='1") == []
        assert [r.trace_id for r in store.run_rows(agent="o'b\" --")] == ["34" * 16]
        assert store.client.query("SELECT count() FROM otel_traces").result_rows[0][0] == 1


def test_run_rows_filters_and_orders_newest_first(home):
    base = 1_700_000_000_000_000_000
    spans = [
        make_span(
            "a1" * 16, "01" * 8, start=base, name="invoke_agent alpha", attributes={"gen_ai.agent.name": "alpha"}
        ),
        make_span(
            "a2" * 16,
            "01" * 8,
            start=base + 10**9,
            name="invoke_agent alpha",
            status="STATUS_CODE_ERROR",
            attributes={"gen_ai.agent.name": "alpha"},
        ),
        make_span(
            "a3" * 16,
            "01" * 8,
            start=base + 2 * 10**9,
            name="invoke_agent beta",
            status="Error",
            attributes={"otel_replay.run.kind": "replay"},
        ),
        make_span("a3" * 16, "02" * 8, start=base + 3 * 10**9, name="invoke_agent nested", parent="01" * 8),
        make_span("a4" * 16, "01" * 8, start=base + 4 * 10**9, name="not_a_run"),
    ]
    with Store.open() as store:
        store.insert_spans(spans)
        assert [r.trace_id for r in store.run_rows()] == ["a3" * 16, "a2" * 16, "a1" * 16]
        assert [r.trace_id for r in store.run_rows(agent="alpha")] == ["a2" * 16, "a1" * 16]
        assert [r.trace_id for r in store.run_rows(agent="beta")] == ["a3" * 16]
        assert [r.trace_id for r in store.run_rows(status="error")] == ["a3" * 16, "a2" * 16]
        assert [r.trace_id for r in store.run_rows(status="ok")] == ["a1" * 16]
        assert [r.trace_id for r in store.run_rows(kind="replay")] == ["a3" * 16]
        assert [r.trace_id for r in store.run_rows(kind="original")] == ["a2" * 16, "a1" * 16]
        assert len(store.run_rows(limit=1)) == 1
        assert store.run_rows(agent="alpha")[0].status_code == "Error"  # old spelling read as the new one
        with pytest.raises(ValueError):
            store.run_rows(status="maybe")
        # runs() takes the same filters as run_rows(), judged by the one filter
        assert [r.trace_id for r in store.runs(agent="alpha", status="error")] == ["a2" * 16]
        assert [r.trace_id for r in store.runs(since_ns=base + 10**9, until_ns=base + 2 * 10**9)] == ["a2" * 16]
        for listing in (store.runs, store.run_rows):
            with pytest.raises(TypeError, match="no run filter named 'agnet'"):
                listing(agnet="alpha")  # type: ignore[call-arg]
            with pytest.raises(ValueError, match="kind must be 'original', 'replay', 'dry' or 'all', got 'both'"):
                listing(kind="both")


def test_run_rows_newest_first_across_time_windows(home):
    # Roots spread from minutes to years before the newest span: the listing reads widening time windows,
    # and its answer must be the same as one query over the whole table, whatever the limit and filter.
    newest = 1_800_000_000_000_000_000
    ages_s = [0, 1800, 3600, 2 * 3600, 3 * 86400, 40 * 86400, 100 * 86400, 4 * 365 * 86400]
    spans = []
    for i, age in enumerate(ages_s):
        tid = f"{i + 1:02x}" * 16
        agent = "alpha" if i % 2 else "beta"
        spans.append(
            make_span(
                tid,
                "01" * 8,
                start=newest - age * 10**9 - 5 * 10**9,
                name=f"invoke_agent {agent}",
                status="Error" if i in (1, 7) else "Ok",
                attributes={"gen_ai.agent.name": agent},
            )
        )
        spans.append(make_span(tid, "02" * 8, start=newest - age * 10**9, parent="01" * 8))
    expected = [f"{i + 1:02x}" * 16 for i in range(len(ages_s))]
    with Store.open() as store:
        store.insert_spans(spans)
        assert [r.trace_id for r in store.run_rows()] == expected
        for limit in range(1, len(expected) + 2):
            assert [r.trace_id for r in store.run_rows(limit=limit)] == expected[:limit]
        assert [r.trace_id for r in store.run_rows(agent="alpha", limit=3)] == expected[1::2][:3]
        assert [r.trace_id for r in store.run_rows(status="error")] == [expected[1], expected[7]]
        assert [r.trace_id for r in store.run_rows(status="error", limit=1)] == [expected[1]]
        assert store.run_rows(agent="nobody") == []


def test_runs_and_load_run_from_real_recordings(home):
    ok_trace = record_run(home, "alpha")
    error_trace = record_run(home, "beta", error=True)
    with Store.open() as store:
        summaries = store.runs()
        assert [(s.trace_id, s.agent, s.status) for s in summaries] == [
            (error_trace, "beta", "error"),
            (ok_trace, "alpha", "ok"),
        ]
        assert store.load_run(ok_trace).trace_id == ok_trace


HOLDER = textwrap.dedent("""
    import sys
    from otel_replay.storage.store import Store
    with Store.open(home=sys.argv[1]):
        print("open", flush=True)
        sys.stdin.readline()  # holds the store until the test says so (or its stdin closes)
""")


def test_second_process_gets_a_busy_error_naming_the_holder(home, monkeypatch):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        clock = FakeClock()
        with monkeypatch.context() as patched, pytest.raises(StoreBusyError) as caught:
            patched.setattr(lock_module, "time", clock)  # the lock's waits, measured without waiting
            Store.open(lock_timeout=0.5)
        waited = round(sum(clock.slept), 9)
        assert 0.5 <= waited < 0.5 + 2 * lock_module.POLL_S, f"it waits the whole timeout, then gives up: {waited}"
        message = str(caught.value)
        assert f"pid {holder.pid}" in message and "OTEL_REPLAY_LOCK_TIMEOUT" in message
        assert "\n" not in message
    finally:
        holder.kill()
        holder.wait()
    with Store.open(lock_timeout=5) as store:  # the kernel dropped the dead holder's lock
        assert store.run_rows() == []


def test_memory_store_does_not_consume_the_spool(home):
    record_run(home)
    with Store.open("chdb://memory") as store:
        assert store.last_ingest is None
        assert store.run_rows() == []
    assert list((home / "spool").glob("*.seg"))


def test_unreachable_server_is_one_clear_line_without_the_password(home):
    with pytest.raises(StoreUnavailableError) as caught:
        Store.open("http://alice:s3cr3t-pw@127.0.0.1:1/otel")
    message = str(caught.value)
    assert "s3cr3t-pw" not in message and "127.0.0.1:1" in message and "\n" not in message


@pytest.mark.parametrize(
    ("url", "shown", "hidden"),
    [
        ("http://alice:s3cr3t-pw@db:8123/otel", "http://alice:***@db:8123/otel", ["s3cr3t-pw"]),
        ("http://alice:At@Pw9x@db:8123/otel", "http://alice:***@db:8123/otel", ["At@Pw9x", "Pw9x"]),  # to the last @
        ("http://alice:Slash/Pw9x@db:8123/otel", "http://***@db:8123/otel", ["Slash", "Pw9x"]),  # all before the @
        ("http://alice:Hash#Pw9x@db:8123/otel", "http://***@db:8123/otel", ["Hash", "Pw9x"]),
        ("http://alice:Quest?Pw9x@db:8123/otel", "http://***@db:8123/otel", ["Quest", "Pw9x"]),
        ("https://tok/en9x@db/otel", "https://***@db/otel", ["tok/en9x", "en9x"]),
        ("alice:s3cr3t-pw@db:8123", "***@db:8123", ["s3cr3t-pw"]),  # no scheme: all before the last @
        ("http://alice@db:8123/otel", "http://alice@db:8123/otel", []),  # a user, no password
        ("chdb:///var/lib/otel-replay/store", "chdb:///var/lib/otel-replay/store", []),
        ("http://db:8123/otel?table=traces", "http://db:8123/otel?table=traces", []),
    ],
)
def test_a_store_url_is_shown_with_its_password_masked_however_malformed(url, shown, hidden):
    assert settings.masked_url(url) == shown
    # a driver's or a parser's error quoting the URL, and pieces of it as it (mis)read them
    error = f"failed for {url}: database {url.rpartition('/')[2]!r}, " + ", ".join(map(repr, hidden))
    scrubbed = settings.scrub_url(error, url)
    assert shown in scrubbed or "***" in scrubbed, scrubbed
    for piece in hidden:
        assert piece not in scrubbed, scrubbed


def test_a_server_url_whose_password_cannot_be_read_is_refused_in_one_line(home):
    for char in "/?#":
        with pytest.raises(StoreError) as caught:
            Store.open(f"http://alice:Zq93{char}Pw9x@127.0.0.1:1/otel")
        message = str(caught.value)
        assert "Zq93" not in message and "Pw9x" not in message and "\n" not in message, message
        assert message.startswith("store URL http://***@127.0.0.1:1/otel: ") and "percent-encode" in message


def test_unsupported_url_is_a_store_error(home):
    with pytest.raises(StoreError):
        Store.open("ftp://example.com/x")
    with pytest.raises(StoreError):
        Store.open("chdb://relative/path")


def test_ddl_text_or_bloom_indexes_by_server_version():
    new = "\n".join(ddl.render_ddl(server_version="26.2.1"))
    old = "\n".join(ddl.render_ddl(server_version="25.8.3.1"))
    assert "text(tokenizer = 'array')" in new and "bloom_filter" not in new
    assert "TraceId TYPE bloom_filter(0.001)" in old and "mapKeys(SpanAttributes) TYPE bloom_filter(0.01)" in old
    for script in (new, old):
        assert "lower(SpanName) TYPE tokenbf_v1(32768, 3, 0)" in script and "Duration TYPE minmax" in script
        assert "PARTITION BY toDate(Timestamp)" in script and "ttl_only_drop_parts = 1" in script
        assert "ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)" in script


def test_ddl_cluster_ttl_database_and_identifier_checks():
    traces, lookup, view = ddl.render_ddl(database="obs", cluster="main", ttl_days=30)
    assert traces.startswith("CREATE TABLE IF NOT EXISTS `obs`.`otel_traces` ON CLUSTER `main`")
    assert "ENGINE = ReplicatedMergeTree()" in traces and "toIntervalDay(30)" in traces
    assert (
        "ENGINE = ReplicatedAggregatingMergeTree()" in lookup and "TTL toDateTime(Start) + toIntervalDay(30)" in lookup
    )
    assert "SimpleAggregateFunction(min, DateTime)" in lookup and "PARTITION BY toStartOfWeek(Start)" in lookup
    assert "TO `obs`.`otel_traces_trace_id_ts`" in view and "WHERE TraceId != ''" in view
    assert "ON CLUSTER" not in "".join(ddl.render_ddl())
    for bad in ({"database": "x; DROP"}, {"cluster": "a b"}, {"ttl_days": 0}, {"table": "1abc"}):
        with pytest.raises(ValueError):
            ddl.render_ddl(**bad)
    assert ddl.render_script(ttl_days=3).rstrip().endswith(";")


def test_init_schema_is_idempotent(home):
    with Store.open() as store:
        store.init_schema()
        store.init_schema(ttl_days=7)  # IF NOT EXISTS: existing tables are left as they are
        assert store.server_version().startswith("26.")
    assert os.path.isdir(home / "store")
