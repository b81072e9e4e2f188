"""The direct ClickHouse exporter: inserts on the real embedded engine, spools when the server is down or failing,
never duplicates a batch whose insert may have been committed, bounds its memory, and never raises into the host.

No ClickHouse server runs on the test machines: the success path uses the real engine (``chdb://`` URLs, opened
only through the exporter's client), failures use a closed port and a local HTTP server answering 500.
"""

from __future__ import annotations

import http.server
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import pytest
from fake_clock import FakeClock
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_replay import configure
from otel_replay.exporting import clickhouse as clickhouse_module
from otel_replay.exporting import setup
from otel_replay.exporting.clickhouse import ClickHouseSpanExporter
from otel_replay.exporting.rows import records_from_request
from otel_replay.exporting.spool import INGESTING_SUFFIX, SEALED_SUFFIX
from otel_replay.storage.store import Store


def record_spans(*exporters) -> list[str]:
    """Record one small agent run (a root with events, two children) through the real SDK; returns trace ids."""
    provider = TracerProvider(resource=Resource.create({"service.name": "ch-exporter-test"}))
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("otel_replay", "0.1.0")
    with tracer.start_as_current_span(
        "invoke_agent support",
        attributes={
            "gen_ai.agent.name": "support",
            "otel_replay.run.id": f"run-{time.time_ns()}",
            "flag": True,
            "ratio": 0.5,
            "tags": ["a", "b"],
        },
    ) as root:
        root.add_event("otel_replay.snapshot.input", {"otel_replay.snapshot.payload": '{"q":"hi"}'})
        with tracer.start_as_current_span("chat fake-model", attributes={"gen_ai.usage.input_tokens": 12}):
            pass
        with tracer.start_as_current_span("execute_tool lookup") as tool:
            tool.add_event("retry", {"attempt": 2})
            tool.set_status(Status(StatusCode.ERROR, "tool failed"))
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return [trace_id]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stored_span_counts(store: Store) -> dict[tuple[str, str], int]:
    result = store.client.query(f"SELECT TraceId, SpanId, count() FROM {store.traces_table} GROUP BY TraceId, SpanId")
    return {(row[0], row[1]): int(row[2]) for row in result.result_rows}


def expected_ids(memory: InMemorySpanExporter) -> set[tuple[str, str]]:
    return {
        (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in memory.get_finished_spans()
    }


@pytest.fixture
def failing_server() -> Iterator[dict[str, int]]:
    """A local HTTP server answering every request with 500; yields {"port", "requests"}."""
    state = {"port": 0, "requests": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def _fail(self) -> None:
            state["requests"] += 1
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            body = b"Code: 999. DB::Exception: simulated failure"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _fail

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["port"] = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def test_inserts_the_same_rows_as_the_store_on_the_real_engine(home, tmp_path):
    url = f"chdb://{tmp_path}/store"
    exporter = ClickHouseSpanExporter(url=url, home=home, retry_seconds=0)
    memory = InMemorySpanExporter()
    [trace_id] = record_spans(exporter, memory)  # provider.shutdown() shuts the exporter down: store closed

    with Store.open(url, home=home, ingest=False) as store:
        inserted = store.load_spans(trace_id)
        assert set(stored_span_counts(store).values()) == {1}
    # The same spans through Store.insert_spans (the spool ingest's mapping) on a fresh engine.
    with Store.open("chdb://memory", home=home, ingest=False) as reference:
        reference.insert_spans(records_from_request(encode_spans(memory.get_finished_spans())))
        expected = reference.load_spans(trace_id)
    assert len(inserted) == 3
    assert inserted == expected
    assert not list((home / "spool").glob("*.seg")), "nothing may be spooled when the insert succeeded"
    root = next(r for r in inserted if not r.parent_span_id)
    assert root.span_attributes["flag"] == "true" and root.span_attributes["tags"] == '["a","b"]'
    assert [e.name for e in root.events] == ["otel_replay.snapshot.input"]


def test_server_down_spools_within_budget_and_ingest_stores_each_span_once(home, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG, logger="otel_replay")
    exporter = ClickHouseSpanExporter(
        url=f"http://127.0.0.1:{free_port()}/default", home=home, retry_seconds=0.5, timeout=1
    )
    memory = InMemorySpanExporter()
    record_spans(memory)
    spans = list(memory.get_finished_spans())
    clock = FakeClock()  # the exporter's backoff sleeps and its budget, measured without waiting
    monkeypatch.setattr(clickhouse_module, "time", clock)
    first = exporter.export(spans[:2])  # tries (refused), retries with backoff for 0.5 s, then spools
    assert first is SpanExportResult.SUCCESS, "a spooled batch is delivered as far as the SDK is concerned"
    assert clock.slept and sum(clock.slept) <= 0.5, f"it retries within its 0.5 s budget: slept {clock.slept}"
    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == len(clock.slept)
    given_up = [r for r in caplog.records if "spooling to" in r.getMessage()]
    assert len(given_up) == 1, caplog.text
    slept = list(clock.slept)
    assert exporter.export(spans[2:]) is SpanExportResult.SUCCESS
    assert clock.slept == slept, "while the server is known down, batches go to the spool at once"
    assert [r for r in caplog.records if "spooling to" in r.getMessage()] == given_up, "and it is not tried again"
    monkeypatch.setattr(clickhouse_module, "time", time)  # shutdown's own waits: real time again
    exporter.shutdown()
    assert exporter.dropped_spans == 0
    assert list((home / "spool").glob("*" + SEALED_SUFFIX)), "failed batches must be in the spool"
    assert not list((home / "spool").glob("*" + INGESTING_SUFFIX)), "refused connection: nothing was committed"

    with Store.open(f"chdb://{tmp_path}/later", home=home) as store:  # the normal ingest
        assert store.last_ingest is not None and store.last_ingest.spans == 3
        counts = stored_span_counts(store)
    assert set(counts) == expected_ids(memory)
    assert set(counts.values()) == {1}


def test_host_program_sees_no_exception_when_the_server_is_down(home, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    exporter = ClickHouseSpanExporter(
        url=f"http://agent:s3cret-pw@127.0.0.1:{free_port()}/default", home=home, retry_seconds=0, timeout=1
    )
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("app").start_as_current_span("work"):
        result = 6 * 7
    provider.shutdown()
    assert result == 42
    assert list((home / "spool").glob("*" + SEALED_SUFFIX))
    assert "connection refused" in caplog.text
    assert "s3cret-pw" not in caplog.text


def test_server_answering_500_behaves_like_down(home, tmp_path, failing_server):
    exporter = ClickHouseSpanExporter(
        url=f"http://127.0.0.1:{failing_server['port']}/default", home=home, retry_seconds=0.3, timeout=1
    )
    memory = InMemorySpanExporter()
    record_spans(exporter, memory)
    assert failing_server["requests"] >= 1, "the exporter must have tried the server"
    assert not list((home / "spool").glob("*" + INGESTING_SUFFIX)), "the server said no: nothing was committed"
    assert list((home / "spool").glob("*" + SEALED_SUFFIX))
    with Store.open(f"chdb://{tmp_path}/later", home=home) as store:
        counts = stored_span_counts(store)
    assert set(counts) == expected_ids(memory)
    assert set(counts.values()) == {1}


class _CommitThenTimeOut:
    """A client whose first insert of a batch reaches the real engine and then fails as if the answer timed out
    (outcome unknown to the exporter); later attempts find the server gone (connection refused)."""

    committed: ClassVar[set[str]] = set()

    def __init__(self, store: Store) -> None:
        self.store = store

    def insert(self, table, rows, *, settings, **kwargs):
        from clickhouse_connect.driver.exceptions import OperationalError

        token = settings["insert_deduplication_token"]
        try:
            if token in self.committed:
                raise ConnectionRefusedError(111, "Connection refused")
            self.store.client.insert(table, rows, settings=settings, **kwargs)
            self.committed.add(token)
            raise TimeoutError("read timed out")
        except OSError as exc:
            raise OperationalError("Error executing HTTP request") from exc

    def close(self) -> None:
        self.store.close()


def test_a_batch_committed_before_a_timeout_is_never_stored_twice(home, tmp_path):
    url = f"chdb://{tmp_path}/store"
    _CommitThenTimeOut.committed = set()
    exporter = ClickHouseSpanExporter(
        client_factory=lambda: _CommitThenTimeOut(Store.open(url, home=home, ingest=False)),
        home=home,
        retry_seconds=0.25,
    )
    memory = InMemorySpanExporter()
    record_spans(exporter, memory)
    # The first batch (one span) reached the engine, its answer was lost; then the server was seen down, so the
    # next two batches went to the spool without being sent during the cooldown.
    assert len(_CommitThenTimeOut.committed) == 1
    assert len(list((home / "spool").glob("*" + INGESTING_SUFFIX))) == 1, "unknown outcome: spooled half-ingested"
    assert list((home / "spool").glob("*" + SEALED_SUFFIX)), "batches never sent: spooled as ordinary segments"

    with Store.open(url, home=home) as store:  # the normal ingest recovers: inserts only what is missing
        counts = stored_span_counts(store)
        assert store.last_ingest is not None and store.last_ingest.duplicates_skipped == 1
    assert set(counts) == expected_ids(memory)
    assert set(counts.values()) == {1}
    assert not list((home / "spool").glob("*" + INGESTING_SUFFIX))


class _TimeOutOnce:
    """A client whose first insert commits on the real engine but loses its answer; later inserts succeed."""

    calls = 0

    def __init__(self, store: Store) -> None:
        self.store = store

    def insert(self, table, rows, **kwargs):
        from clickhouse_connect.driver.exceptions import OperationalError

        self.store.client.insert(table, rows, **kwargs)
        type(self).calls += 1
        if type(self).calls == 1:
            raise OperationalError("Error executing HTTP request: read timed out")

    def close(self) -> None:
        self.store.close()


def test_a_batch_the_server_may_have_committed_is_never_sent_again(home, tmp_path):
    url = f"chdb://{tmp_path}/store"
    _TimeOutOnce.calls = 0
    exporter = ClickHouseSpanExporter(
        client_factory=lambda: _TimeOutOnce(Store.open(url, home=home, ingest=False)), home=home, retry_seconds=2
    )
    memory = InMemorySpanExporter()
    record_spans(memory)
    exporter.export(memory.get_finished_spans())
    assert _TimeOutOnce.calls == 1, "a batch whose insert may have been committed was sent again"
    exporter.shutdown()
    with Store.open(url, home=home) as store:  # the recovery ingest stores only what the lost insert did not
        counts = stored_span_counts(store)
    assert set(counts) == expected_ids(memory)
    assert set(counts.values()) == {1}
    assert not [p for p in (home / "spool").iterdir() if not p.name.startswith(".")], "every segment was ingested"


def test_half_ingested_batches_left_by_a_previous_process_are_published_at_flush(home):
    from otel_replay.exporting.spool import SpoolExporter

    memory = InMemorySpanExporter()
    record_spans(memory)
    left_behind = SpoolExporter(home / "spool" / ".uncertain")  # sealed, but its process died before moving it
    left_behind.export(memory.get_finished_spans())
    left_behind.shutdown()
    exporter = ClickHouseSpanExporter(url=f"http://127.0.0.1:{free_port()}/default", home=home)
    assert exporter.force_flush(1000)
    assert len(list((home / "spool").glob("*" + INGESTING_SUFFIX))) == 1
    assert not list((home / "spool" / ".uncertain").iterdir())
    exporter.shutdown()


def test_memory_is_bounded_when_server_and_spool_are_both_unavailable(home, tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    exporter = ClickHouseSpanExporter(
        url=f"http://127.0.0.1:{free_port()}/default",
        spool_directory=blocker / "spool",
        retry_seconds=0,
        timeout=1,
        max_pending_rows=3,
    )
    memory = InMemorySpanExporter()
    record_spans(memory)
    spans: list[ReadableSpan] = list(memory.get_finished_spans())
    caplog.set_level(logging.WARNING, logger="otel_replay")
    results = [exporter.export(spans[:2]), exporter.export(spans[2:]), exporter.export(spans[:2])]
    assert results == [SpanExportResult.FAILURE] * 3
    assert exporter._pending_rows <= 3
    assert exporter.dropped_spans == 2  # the third batch would exceed the cap
    assert "dropped 2 span(s)" in caplog.text
    assert exporter.force_flush(200) is False
    exporter.shutdown()  # never raises; what is still held is reported lost
    assert exporter.dropped_spans == 5  # plus the 3 still held at shutdown
    assert exporter.export(spans) is SpanExportResult.FAILURE


def test_configure_with_the_clickhouse_exporter_records_runs_into_the_store(home, tmp_path):
    import otel_replay as orp

    url = f"chdb://{tmp_path}/store"

    @orp.tool(risk="read")
    def lookup(key: str) -> str:
        return key.upper()

    @orp.agent("direct-insert")
    def agent(question: str) -> str:
        return lookup(question)

    orp.configure(home=home, store=url, exporter="clickhouse")
    try:
        assert agent("hi") == "HI"
        assert orp.flush()
    finally:
        orp.configure(home=home, exporter="spool")  # shuts the exporter down, which closes the engine
    assert not list((home / "spool").glob("*.seg")), "everything went straight into the store"
    with Store.open(url, home=home) as store:
        (summary,) = store.runs(agent="direct-insert")
        run = store.load_run(summary.trace_id)
    assert [step.name for step in run.steps] == ["lookup"]


def test_configure_without_store_url_raises_at_setup(home, monkeypatch):
    with pytest.raises(ValueError, match="store URL"):
        configure(home=home, exporter="clickhouse")
    monkeypatch.setenv("OTEL_REPLAY_STORE", f"http://127.0.0.1:{free_port()}/default")
    try:
        configure(home=home, exporter="clickhouse")  # unreachable server: setup still succeeds (lazy client)
        runtime = setup.current_runtime()
        assert runtime is not None and isinstance(runtime.exporter, ClickHouseSpanExporter)
        assert runtime.exporter.spool_directory == home / "spool"
    finally:
        configure(home=home, exporter="spool")


def test_bad_settings_raise_at_setup(home, monkeypatch):
    with pytest.raises(ValueError):
        ClickHouseSpanExporter(url="mysql://host/db", home=home)
    with pytest.raises(ValueError):
        ClickHouseSpanExporter(url="http://h:8123/bad-name!", home=home)
    with pytest.raises(ValueError):
        ClickHouseSpanExporter(url="http://h:8123/default", home=home, max_pending_rows=-1)
    with pytest.raises(ValueError):
        ClickHouseSpanExporter(url="http://h:8123/default", home=home, timeout=0)
    with pytest.raises(ValueError):
        ClickHouseSpanExporter(url="chdb://memory", home=home)
    monkeypatch.setenv("OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS", "soon")
    with pytest.raises(ValueError, match="OTEL_REPLAY_CLICKHOUSE_RETRY_SECONDS"):
        ClickHouseSpanExporter(url="http://h:8123/default", home=home)
