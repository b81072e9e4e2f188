"""Spool → store ingest: exactly once, whatever point a SIGKILL interrupts it at."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_replay.exporting.rows import rows_from_request
from otel_replay.exporting.spool import SEGMENT_MAGIC, SpoolExporter, encode_record, read_segment, sealed_segments
from otel_replay.storage.ingest import ingest_spool
from otel_replay.storage.store import Store

SEGMENTS = 3
SPANS_PER_SEGMENT = 40


def fill_spool(spool: Path, *, segments: int = SEGMENTS, spans: int = SPANS_PER_SEGMENT) -> int:
    """Record ``segments`` sealed segments of ``spans`` spans each with the real SDK; returns the span count."""
    exporter = SpoolExporter(spool)
    provider = TracerProvider(resource=Resource.create({"service.name": "ingest-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for segment in range(segments):
        for i in range(spans):
            with tracer.start_as_current_span(f"s{segment}-{i}", attributes={"i": i}):
                pass
        exporter.force_flush()
    provider.shutdown()
    return segments * spans


def stored_counts(store: Store) -> tuple[int, int]:
    """(rows, distinct (TraceId, SpanId)) in otel_traces."""
    total, distinct = store.client.query("SELECT count(), uniqExact(TraceId, SpanId) FROM otel_traces").result_rows[0]
    return int(total), int(distinct)


def test_ingest_is_idempotent_and_empties_the_spool(home):
    expected = fill_spool(home / "spool")
    with Store.open(ingest=False) as store:
        report = store.ingest()
        assert (report.segments, report.spans, report.skipped_records) == (SEGMENTS, expected, 0)
        again = store.ingest()
        assert (again.segments, again.spans) == (0, 0)
        assert stored_counts(store) == (expected, expected)
    assert not [p for p in (home / "spool").iterdir() if not p.name.startswith(".")]


def test_torn_tail_is_skipped_and_reported_and_the_rest_ingested(home):
    fill_spool(home / "spool", segments=1, spans=5)
    (segment,) = sealed_segments(home / "spool")
    segment.write_bytes(segment.read_bytes() + encode_record(b"x" * 100)[:-30])
    with Store.open() as store:
        assert store.last_ingest.spans == 5
        assert store.last_ingest.skipped_records == 1
        assert "torn" in store.last_ingest.problems[0]


def test_checksummed_garbage_payload_is_reported_not_fatal(home):
    spool = home / "spool"
    fill_spool(spool, segments=1, spans=2)
    (spool / "00000000000000000000-x-1-deadbeef.seg").write_bytes(SEGMENT_MAGIC + encode_record(b"\xff\xff not otlp"))
    with Store.open() as store:
        assert store.last_ingest.spans == 2
        assert store.last_ingest.skipped_records == 1
        assert "not an OTLP" in " ".join(store.last_ingest.problems)


def test_half_ingested_segment_inserts_only_missing_spans(home):
    spool = home / "spool"
    expected = fill_spool(spool, segments=1, spans=10)
    (segment,) = sealed_segments(spool)
    rows = [row for payload in read_segment(segment).payloads for row in rows_from_request(payload)]
    claimed = segment.rename(segment.with_suffix(".ingesting"))
    with Store.open(ingest=False) as store:
        store.insert_rows(rows[:4])  # what a killed ingest got in before dying
        report = store.ingest()
        assert (report.recovered_segments, report.duplicates_skipped, report.spans) == (1, 4, 6)
        assert stored_counts(store) == (expected, expected)
    assert not claimed.exists()


def test_busy_spool_is_left_to_the_other_ingester(home):
    spool = home / "spool"
    fill_spool(spool, segments=1, spans=1)
    fd = os.open(spool / ".ingest.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: a concurrent ingester
    try:
        with Store.open("chdb://memory") as store:
            report = ingest_spool(store, spool)
            assert report.busy and report.spans == 0
    finally:
        os.close(fd)
    assert sealed_segments(spool)


KILLER = Path(__file__).resolve().parent / "ingest_killer.py"


def ingest_and_die(home: Path, point: str, nth: int) -> None:
    env = dict(os.environ, OTEL_REPLAY_FAULTS=f"ingest.{point}@{nth}=kill")  # the named point of otel_replay.faults
    result = subprocess.run(
        [sys.executable, str(KILLER), str(home), "25"], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == -9, (result.returncode, result.stdout, result.stderr)


@pytest.mark.parametrize(
    ("kills"),
    [
        [("claimed", 1)],  # segments renamed, nothing inserted
        [("inserted_chunk", 2)],  # half of the rows inserted
        [("inserted", 1)],  # everything inserted, nothing deleted
        [("deleted_one", 2)],  # some claimed segments deleted, one still .ingesting
        [("inserted_chunk", 1), ("inserted_chunk", 1)],  # killed again while recovering
    ],
    ids=["after-claim", "mid-insert", "after-insert", "mid-delete", "twice"],
)
def test_sigkill_at_any_point_of_ingest_leaves_every_span_exactly_once(home, kills):
    expected = fill_spool(home / "spool")
    for point, nth in kills:
        ingest_and_die(home, point, nth)
    assert list((home / "spool").glob("*.ingesting")), "the kill should have interrupted an ingest"
    with Store.open() as store:  # opening ingests: recovery of .ingesting, then anything still sealed
        assert stored_counts(store) == (expected, expected)
        assert store.ingest().spans == 0
    assert not list((home / "spool").glob("*.ingesting")) and not sealed_segments(home / "spool")


def test_a_segment_the_store_rejects_twice_is_set_aside_and_the_rest_stored(home, monkeypatch):
    """A segment whose rows the store refuses (while it otherwise answers) fails the first ingest, which keeps
    it; the next ingest recovers the batch one segment at a time and sets the poisoned one aside as ``.bad``,
    so the store opens again and every other span is stored."""
    from otel_replay.errors import StoreError

    expected = fill_spool(home / "spool")
    segment = read_segment(sealed_segments(home / "spool")[1]).payloads
    poisoned = {row[2] for row in rows_from_request(segment[0])}  # one span the store refuses …
    kept_aside = sum(len(rows_from_request(payload)) for payload in segment)  # … sets its whole segment aside
    with Store.open(ingest=False) as store:
        real_insert = store.insert_rows

        def refusing(rows):  # the store's answer to data it cannot take: a failing writer for those rows
            if any(row[2] in poisoned for row in rows):
                raise StoreError("Code: 27. DB::Exception: Cannot parse input (simulated)")
            return real_insert(rows)

        monkeypatch.setattr(store, "insert_rows", refusing)
        with pytest.raises(StoreError):
            store.ingest()
        report = store.ingest()
        assert any("rejects its spans a second time" in p for p in report.problems), report.problems
        total, distinct = stored_counts(store)
        assert total == distinct == expected - kept_aside
    bad = list((home / "spool").glob("*.bad"))
    assert len(bad) == 1 and not list((home / "spool").glob("*.ingesting"))
    with Store.open() as store:  # opens (and ingests) normally again
        assert stored_counts(store)[0] == expected - kept_aside
