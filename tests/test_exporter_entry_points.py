"""The exporters are registered where the OTel SDK's own configuration looks for them
(``OTEL_TRACES_EXPORTER=otel_replay_spool`` / ``otel_replay_clickhouse``) and build from the environment alone."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_replay as orp
from otel_replay.exporting.clickhouse import ClickHouseSpanExporter
from otel_replay.exporting.spool import SpoolExporter


def _registered() -> dict[str, type]:
    return {
        e.name: e.load()
        for e in entry_points(group="opentelemetry_traces_exporter")
        if e.name.startswith("otel_replay")
    }


def test_both_exporters_are_registered() -> None:
    assert _registered() == {"otel_replay_spool": SpoolExporter, "otel_replay_clickhouse": ClickHouseSpanExporter}


def test_the_spool_exporter_built_without_arguments_spools_into_the_home(home: Path) -> None:
    exporter = _registered()["otel_replay_spool"]()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("app").start_as_current_span("invoke_agent from-the-sdk") as span:
        span.set_attribute("otel_replay.run.id", "r-1")
    provider.shutdown()
    with orp.Store.open() as store:
        assert [r.agent for r in store.runs()] == ["from-the-sdk"]


def test_the_clickhouse_exporter_reads_its_store_from_the_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_STORE", "http://user:pw@127.0.0.1:9/default")
    exporter = _registered()["otel_replay_clickhouse"]()
    assert "127.0.0.1:9" in exporter.url
    exporter.shutdown()
