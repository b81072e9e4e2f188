"""The spool ingest pauses the cyclic garbage collector through the one shared, counted pause.

The collector is process-wide: an ingest must leave it as the host program had it, and must not switch it back
on while another user of the pause (a replay in another thread) is still inside its block.
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_replay._gc import gc_paused
from otel_replay.exporting.spool import SpoolExporter
from otel_replay.storage import ingest
from otel_replay.storage.store import Store


def fill_spool(spool: Path, spans: int = 5) -> int:
    """Record ``spans`` spans into one sealed spool segment with the real SDK."""
    exporter = SpoolExporter(spool)
    provider = TracerProvider(resource=Resource.create({"service.name": "gc-pause-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for i in range(spans):
        with tracer.start_as_current_span(f"s{i}", attributes={"i": i}):
            pass
    provider.shutdown()
    return spans


@pytest.fixture
def collector_restored():
    """Whatever a test does to the collector, it is enabled again afterwards."""
    yield
    gc.enable()


def test_an_ingest_leaves_the_collector_as_the_host_program_had_it(home: Path, collector_restored: None) -> None:
    with Store.open(ingest=False) as store:
        fill_spool(home / "spool")
        assert store.ingest().spans == 5
        assert gc.isenabled()
        gc.disable()
        fill_spool(home / "spool")
        assert store.ingest().spans == 5
        assert not gc.isenabled()  # never switched on by an ingest when the host had it off


def test_an_ingest_ending_inside_another_pause_leaves_the_collector_off(
    home: Path, collector_restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = contextlib.ExitStack()  # another user of the pause (a replay in another thread) enters during the ingest

    def checkpoint(name: str) -> None:
        if name == "claimed":
            other.enter_context(gc_paused())

    monkeypatch.setattr(ingest, "_checkpoint", checkpoint)
    expected = fill_spool(home / "spool")
    with Store.open(ingest=False) as store:
        assert store.ingest().spans == expected
        assert not gc.isenabled()  # the other block is still inside its pause
        other.close()
        assert gc.isenabled()  # the last block out switches it back on
