"""The overview dashboard's Replay lab row on chDB: lab spans written as the lab runner writes them (the OTel
SDK through the project's exporter, ``otel_replay.lab.*`` attributes), then each panel's SQL expanded as Grafana
expands it and run on the store. Labs over time counts each lab once (also when its span is stored twice), the
pass rate per scorer averages the labs' ``otel_replay.lab.scores`` and leaves a scorer that applied to nothing
out, and the Labs table lists them newest first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from grafana_macros import Variable, expand
from lab_spans import write_lab_span

import otel_replay as orp
from otel_replay.storage.store import Store

BOARD = json.loads(
    (Path(__file__).resolve().parents[1] / "dashboards" / "otel-replay-overview.json").read_text(encoding="utf-8")
)
LAB_A_NS = int(datetime(2026, 1, 5, 10, 0, tzinfo=timezone.utc).timestamp()) * 1_000_000_000
"""The first lab's start; the second starts a second later, in the same hour (one point per scorer)."""
LAB_PANELS = ("Labs over time by mode and result", "Pass rate per scorer", "Labs")


def _panel(title: str) -> dict[str, Any]:
    return next(p for p in BOARD["panels"] if p.get("title") == title)


@pytest.fixture(scope="module")
def lab_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    home = tmp_path_factory.mktemp("lab-grafana") / "otel-replay-home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for var in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(var, raising=False)
        orp.configure(home=home, exporter="spool")
        write_lab_span(
            lab_id="lab-a",
            mode="deterministic",
            cohort=["0" * 32],
            runs=4,
            matched=4,
            diverged=0,
            failed=False,
            scores={"output_equal": 1.0, "cost_delta": 1.0, "citations_kept": None},
            start_time_ns=LAB_A_NS,
        )
        write_lab_span(
            lab_id="lab-b",
            mode="whatif",
            cohort=["1" * 32],
            runs=4,
            matched=1,
            diverged=3,
            failed=True,
            scores={"output_equal": 0.5, "cost_delta": 0.75, "citations_kept": None},
            start_time_ns=LAB_A_NS + 1_000_000_000,
        )
        orp.flush()
        store = Store.open()
        try:
            yield store
        finally:
            store.close()


def _rows(store: Store, title: str, *, database: str | None = None) -> list[tuple[Any, ...]]:
    ((last,),) = store.client.query("SELECT max(Timestamp) FROM otel_traces").result_rows
    end = last.replace(tzinfo=timezone.utc) + timedelta(minutes=5)
    variables = {"datasource": Variable("clickhouse"), "jaeger_url": Variable("http://localhost:16686")}
    sql = expand(
        _panel(title)["targets"][0]["rawSql"],
        start=end - timedelta(hours=6),
        end=end,
        interval_s=3600,
        variables=variables,
    )
    if database is not None:
        sql = sql.replace("FROM otel_traces", f"FROM {database}.otel_traces")
    return store.client.query(sql).result_rows


def test_the_lab_row_is_on_the_overview() -> None:
    row = next(p for p in BOARD["panels"] if p.get("type") == "row" and p["title"] == "Replay lab")
    panels = [_panel(t) for t in LAB_PANELS]
    assert all(p["gridPos"]["y"] > row["gridPos"]["y"] for p in panels)
    assert [p["type"] for p in panels] == ["timeseries", "timeseries", "table"]


def test_labs_over_time_counts_each_lab_once(lab_store: Store) -> None:
    rows = _rows(lab_store, "Labs over time by mode and result")
    counts: dict[str, int] = {}
    for _, series, labs in rows:
        counts[series] = counts.get(series, 0) + labs
    assert counts == {"deterministic / passed": 1, "whatif / failed": 1}


def test_pass_rate_per_scorer_averages_the_labs(lab_store: Store) -> None:
    rows = _rows(lab_store, "Pass rate per scorer")
    by_scorer: dict[str, list[float]] = {}
    for _, scorer, rate in rows:
        by_scorer.setdefault(scorer, []).append(rate)
    # both labs fall in one interval (one hour): each scorer's mean over the two labs; null left out
    assert {k: [round(v, 4) for v in vs] for k, vs in by_scorer.items()} == {
        "output_equal": [0.75],
        "cost_delta": [0.875],
    }


def test_the_labs_table_lists_them_newest_first(lab_store: Store) -> None:
    rows = _rows(lab_store, "Labs")
    assert [(r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        ("lab-b", "whatif", 4, 1, 3, "true"),
        ("lab-a", "deterministic", 4, 4, 0, "false"),
    ]
    assert json.loads(rows[0][7]) == {"output_equal": 0.5, "cost_delta": 0.75, "citations_kept": None}


def test_a_lab_span_stored_twice_counts_once(lab_store: Store) -> None:
    from otel_replay.storage import ddl

    client = lab_store.client
    database = "lab_dup"
    client.command(f"DROP DATABASE IF EXISTS {database} SYNC")
    client.command(f"CREATE DATABASE {database}")
    try:
        for statement in ddl.render_script().split(";"):
            body = "\n".join(line for line in statement.splitlines() if not line.lstrip().startswith("--"))
            if body.strip():
                client.command(body.replace("`default`.", f"`{database}`."))
        for _ in range(2):
            client.command(f"INSERT INTO {database}.otel_traces SELECT * FROM default.otel_traces")
        for title in LAB_PANELS:
            assert sorted(map(repr, _rows(lab_store, title, database=database))) == sorted(
                map(repr, _rows(lab_store, title))
            ), title
    finally:
        client.command(f"DROP DATABASE IF EXISTS {database} SYNC")
