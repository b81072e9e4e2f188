"""The spool exporter (real OTel SDK) and the segment reader: sealing, rotation, torn records, orphan adoption."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult

from otel_replay.exporting.rows import records_from_request
from otel_replay.exporting.spool import (
    SEGMENT_MAGIC,
    SpoolExporter,
    adopt_orphaned_segments,
    encode_record,
    read_segment,
    sealed_segments,
)


def provider_with(exporter, *, batch: bool = False) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "spool-test"}))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    return provider


def spans_in(directory: Path) -> list:
    return [
        record
        for path in sealed_segments(directory)
        for payload in read_segment(path).payloads
        for record in records_from_request(payload)
    ]


def test_force_flush_seals_the_segment_and_spans_read_back(tmp_path):
    exporter = SpoolExporter(tmp_path / "spool")
    provider = provider_with(exporter)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("outer", attributes={"n": 1}), tracer.start_as_current_span("inner"):
        pass
    open_path = exporter.open_segment
    assert open_path is not None and open_path.suffix == ".open" and open_path.exists()
    assert exporter.force_flush()
    assert not open_path.exists()
    assert [p.suffix for p in (tmp_path / "spool").iterdir() if not p.name.startswith(".")] == [".seg"]
    assert sorted(r.span_name for r in spans_in(tmp_path / "spool")) == ["inner", "outer"]
    provider.shutdown()


def test_batch_processor_and_shutdown_seal_everything(tmp_path):
    exporter = SpoolExporter(tmp_path / "spool")
    provider = provider_with(exporter, batch=True)
    tracer = provider.get_tracer("t")
    for i in range(50):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    provider.shutdown()
    assert not list((tmp_path / "spool").glob("*.open"))
    assert len(spans_in(tmp_path / "spool")) == 50
    assert exporter.export([]) is SpanExportResult.FAILURE  # after shutdown, like the SDK's exporters


def test_segments_rotate_by_size(tmp_path):
    exporter = SpoolExporter(tmp_path / "spool", segment_max_bytes=1024)
    provider = provider_with(exporter)
    tracer = provider.get_tracer("t")
    for i in range(20):
        with tracer.start_as_current_span(f"span-{i}", attributes={"pad": "x" * 200}):
            pass
    provider.shutdown()
    segments = sealed_segments(tmp_path / "spool")
    assert len(segments) >= 5
    assert sorted(int(r.span_name.split("-")[1]) for r in spans_in(tmp_path / "spool")) == list(range(20))


def test_segment_names_carry_pid_and_random_part(tmp_path):
    import os

    exporter = SpoolExporter(tmp_path / "spool")
    provider = provider_with(exporter)
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    name = exporter.open_segment.name
    assert f"-{os.getpid()}-" in name
    provider.shutdown()


def test_export_never_raises_and_returns_failure(tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("file where the spool folder should be")
    exporter = SpoolExporter(blocker / "spool")
    provider = provider_with(exporter)
    with provider.get_tracer("t").start_as_current_span("x"):
        pass  # SimpleSpanProcessor exports here; nothing may raise
    span = provider.get_tracer("t").start_span("y")
    span.end()
    assert exporter.export([span]) is SpanExportResult.FAILURE
    assert "could not write" in caplog.text
    provider.shutdown()


def test_bad_settings_raise_value_error_at_setup(tmp_path, monkeypatch):
    with pytest.raises(ValueError):
        SpoolExporter(tmp_path, segment_max_bytes=10)
    with pytest.raises(ValueError):
        SpoolExporter(tmp_path, fsync="sometimes")
    monkeypatch.setenv("OTEL_REPLAY_SPOOL_SEGMENT_BYTES", "lots")
    with pytest.raises(ValueError):
        SpoolExporter(tmp_path)


def test_concurrent_exports_from_threads_are_all_kept(tmp_path):
    exporter = SpoolExporter(tmp_path / "spool", segment_max_bytes=4096)
    provider = provider_with(exporter)
    tracer = provider.get_tracer("t")

    def work(n: int) -> None:
        for i in range(40):
            with tracer.start_as_current_span(f"{n}-{i}"):
                pass
            if i % 10 == 0:
                exporter.force_flush()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    provider.shutdown()
    names = [r.span_name for r in spans_in(tmp_path / "spool")]
    assert len(names) == 240 and len(set(names)) == 240


def _segment(path: Path, payloads: list[bytes]) -> Path:
    path.write_bytes(SEGMENT_MAGIC + b"".join(encode_record(p) for p in payloads))
    return path


def test_torn_trailing_record_is_skipped_and_reported(tmp_path):
    path = _segment(tmp_path / "a.seg", [b"first", b"second", b"third-record-payload"])
    path.write_bytes(path.read_bytes()[:-7])  # a write cut short by a crash
    read = read_segment(path)
    assert read.payloads == (b"first", b"second")
    assert read.skipped == 1
    assert "torn record" in read.problems[0]


def test_torn_record_header_is_skipped(tmp_path):
    path = _segment(tmp_path / "a.seg", [b"first"])
    path.write_bytes(path.read_bytes() + b"ORR1\x05")
    read = read_segment(path)
    assert read.payloads == (b"first",) and read.skipped == 1


def test_corrupt_record_in_the_middle_is_skipped_and_reading_resumes(tmp_path):
    path = _segment(tmp_path / "a.seg", [b"one", b"two-two-two", b"three"])
    data = bytearray(path.read_bytes())
    data[data.index(b"two-two") + 2] ^= 0xFF  # flip a payload bit: checksum no longer matches
    path.write_bytes(bytes(data))
    read = read_segment(path)
    assert read.payloads == (b"one", b"three")
    assert read.skipped == 1 and "checksum" in read.problems[0]


def test_garbage_and_empty_files_never_crash_the_reader(tmp_path):
    assert read_segment(_segment(tmp_path / "empty.seg", [])).payloads == ()
    garbage = tmp_path / "g.seg"
    garbage.write_bytes(b"\x00\xffnot a segment at all" * 10)
    read = read_segment(garbage)
    assert read.payloads == () and read.skipped >= 1
    (tmp_path / "zero.seg").write_bytes(b"")
    assert read_segment(tmp_path / "zero.seg").skipped == 0


WRITER = textwrap.dedent("""
    import os, signal, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otel_replay.exporting.spool import SpoolExporter
    exporter = SpoolExporter(sys.argv[1])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for i in range(3):
        with provider.get_tracer("t").start_as_current_span(f"orphan-{i}"):
            pass
    print(exporter.open_segment, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # die without flushing: the segment stays .open
""")


def test_open_segment_of_a_dead_process_is_adopted(tmp_path):
    spool = tmp_path / "spool"
    result = subprocess.run([sys.executable, "-c", WRITER, str(spool)], capture_output=True, text=True, timeout=60)
    orphan = Path(result.stdout.strip())
    assert orphan.suffix == ".open" and orphan.exists(), result.stderr
    adopted = adopt_orphaned_segments(spool)
    assert adopted == [orphan.with_suffix(".seg")]
    assert sorted(r.span_name for r in spans_in(spool)) == ["orphan-0", "orphan-1", "orphan-2"]


def test_open_segment_of_a_live_writer_is_not_adopted(tmp_path):
    exporter = SpoolExporter(tmp_path / "spool")
    provider = provider_with(exporter)
    with provider.get_tracer("t").start_as_current_span("live"):
        pass
    assert adopt_orphaned_segments(tmp_path / "spool") == []
    assert exporter.open_segment.exists()
    provider.shutdown()
