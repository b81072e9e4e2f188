"""The Grafana dashboards in dashboards/: well-formed, wired to the data source variable, and every query runs.

No Grafana here: each SQL target is expanded with tests/grafana_macros.py (the ClickHouse data source's
macros and Grafana's variable interpolation, for a concrete time range and variable values) and run on a
chDB store holding the demo's three runs, a mock replay of the failed run and a refused live replay of the
refund run. Every panel must return rows for that data, and the same numbers when every span is stored two or
three times (an at-least-once delivery). The overview's "Collector pipeline" row reads Prometheus: its
queries may only name metrics the pinned Collector publishes (tests/data/collector_schema_v0.152.json).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_macros import ALL, ExpansionError, Variable, expand
from lab_spans import write_lab_span

import otel_replay as orp
from otel_replay.storage.store import Store

REPO = Path(__file__).resolve().parents[1]
DASHBOARDS = REPO / "dashboards"
PROVIDER = DASHBOARDS / "provisioning" / "dashboards" / "otel-replay.yaml"
PLUGIN = "grafana-clickhouse-datasource"
DATASOURCE_UID = "clickhouse"  # what dashboards/provisioning/datasources/ provisions
PROMETHEUS = {"type": "prometheus", "uid": "${prometheus}"}  # the overview's Collector pipeline row
COLLECTOR_METRICS = json.loads((REPO / "tests" / "data" / "collector_schema_v0.152.json").read_text(encoding="utf-8"))[
    "published_metrics"
]
JAEGER_LINK = "${jaeger_url}/trace/${__data.fields.TraceId}"
TRACE_COLUMNS = {
    "traceID",
    "spanID",
    "parentSpanID",
    "serviceName",
    "operationName",
    "startTime",
    "duration",
    "tags",
    "serviceTags",
}


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


DASHBOARD_FILES = sorted(DASHBOARDS.glob("*.json"))
BOARDS = {path.name: _load(path) for path in DASHBOARD_FILES}


def _panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows keep their panels inside


def _query_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Panels that query ClickHouse (rows and the Prometheus panels of the pipeline row left out)."""
    return [p for p in _panels(board) if p.get("type") != "row" and p.get("datasource") != PROMETHEUS]


def _prometheus_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in _panels(board) if p.get("datasource") == PROMETHEUS]


def _variables(board: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in board["templating"]["list"]}


def _targets() -> list[Any]:
    cases = []
    for name, board in BOARDS.items():
        for panel in _query_panels(board):
            for target in panel.get("targets", []):
                case_id = f"{name.removesuffix('.json')}:{panel['id']}:{panel['title']}:{target['refId']}"
                cases.append(pytest.param(name, panel["id"], target["refId"], id=case_id))
    return cases


# ------------------------------------------------------------------------------------------- the data


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A chDB store with the demo's runs plus a mock replay and a refused live replay; closed at the end."""
    from otel_replay.demo.agent import run_demo
    from otel_replay.replay.engine import replay

    home = tmp_path_factory.mktemp("dashboards") / "otel-replay-home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for var in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(var, raising=False)
        orp.configure(home=home, exporter="spool")
        outcomes = run_demo()
        assert [error is None for _, error in outcomes] == [True, True, False]
        orp.flush()
        store = Store.open()
        try:
            originals = store.runs(kind="original")
            assert len(originals) == 3
            failed = next(s for s in originals if s.status == "error")
            refund = store.client.query(
                "SELECT any(TraceId) FROM otel_traces WHERE SpanName = 'execute_tool issue_refund'"
            ).result_rows[0][0]
            mock = replay(failed.trace_id, mode="mock", store=store)
            refused = replay(refund, mode="live", reason="x", store=store)
            assert refused.outcome == "refused"
            # a lab over the demo's runs, for the overview's Replay lab row (tests/test_lab_report_grafana.py)
            write_lab_span(
                lab_id="lab-demo",
                mode="deterministic",
                cohort=[s.trace_id for s in originals],
                runs=3,
                matched=2,
                diverged=1,
                failed=True,
                scores={"output_equal": 2 / 3, "citations_kept": None},
            )
            orp.flush()
            store.ingest()
            yield {
                "store": store,
                "failed": failed.trace_id,
                "refund": refund,
                "mock_replay": mock.replay_trace_id,
                "refused_replay": refused.replay_trace_id,
            }
        finally:
            store.close()


def _window(store: Store) -> tuple[datetime, datetime]:
    """The dashboards' time range: six hours ending five minutes after the store's last span (never the clock
    at collection time, which a long test session leaves behind)."""
    ((last,),) = store.client.query("SELECT max(Timestamp) FROM otel_traces").result_rows
    end = last.replace(tzinfo=timezone.utc) + timedelta(minutes=5)
    return end - timedelta(hours=6), end


def _scenarios(board: dict[str, Any], data: dict[str, Any]) -> dict[str, dict[str, Variable]]:
    """Variable values to run a dashboard's queries with: All everywhere, and concrete selections."""
    names = set(_variables(board))
    base = {"datasource": Variable(DATASOURCE_UID), "jaeger_url": Variable("http://localhost:16686")}
    if "trace_id" in names:
        return {
            trace: {**base, "trace_id": Variable(data[trace])}
            for trace in ("refund", "failed", "refused_replay", "mock_replay")
        }
    every = {
        "agent": Variable([ALL], ["support-agent"]),
        "status": Variable([ALL], ["ok", "error"]),
        "kind": Variable([ALL], ["original", "replay"]),
    }
    chosen = {
        "agent": Variable(["support-agent"], ["support-agent"]),
        "status": Variable(["ok", "error"], ["ok", "error"]),
        "kind": Variable(["original", "replay"], ["original", "replay"]),
    }
    return {
        "all": {**base, **{k: v for k, v in every.items() if k in names}},
        "selected": {**base, **{k: v for k, v in chosen.items() if k in names}},
    }


def _query(store: Store, sql: str, variables: dict[str, Variable]) -> Any:
    start, end = _window(store)
    expanded = expand(sql, start=start, end=end, interval_s=60, variables=variables)
    return store.client.query(expanded)


def _run(store: Store, sql: str, variables: dict[str, Variable]) -> list[tuple[Any, ...]]:
    return _query(store, sql, variables).result_rows


def _target(board_name: str, panel_id: int, ref_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    panel = next(p for p in _query_panels(BOARDS[board_name]) if p["id"] == panel_id)
    return panel, next(t for t in panel["targets"] if t["refId"] == ref_id)


# ----------------------------------------------------------------------------------------- structure


def test_the_dashboards_exist() -> None:
    assert {"otel-replay-overview.json", "otel-replay-run.json"} <= set(BOARDS)
    uids = [board["uid"] for board in BOARDS.values()]
    assert len(uids) == len(set(uids))


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_shape(name: str) -> None:
    board = BOARDS[name]
    assert board["schemaVersion"] >= 39
    assert board["title"] and board["uid"] and len(board["uid"]) <= 40
    variables = _variables(board)
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == PLUGIN
    assert ds["current"]["value"] == DATASOURCE_UID
    panels = list(_panels(board))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {name}"
    for panel in panels:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"])
        if panel["type"] != "row":
            assert panel["datasource"] in ({"type": PLUGIN, "uid": "${datasource}"}, PROMETHEUS)
            assert panel["targets"], f"panel {panel['title']!r} has no query"
    if _prometheus_panels(board):
        prometheus = variables["prometheus"]
        assert prometheus["type"] == "datasource" and prometheus["query"] == "prometheus"
        assert prometheus["current"]["value"] == "prometheus"  # dashboards/provisioning/datasources/prometheus.yaml


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_target_is_sql_on_the_datasource_variable(name: str) -> None:
    for panel in _query_panels(BOARDS[name]):
        for target in panel["targets"]:
            assert target["datasource"] == {"type": PLUGIN, "uid": "${datasource}"}
            assert target["editorType"] == "sql"
            assert target["format"] in (0, 1, 2, 3)
            assert "otel_traces" in target["rawSql"]
            assert target["refId"]
        if panel["type"] == "timeseries":
            assert all(t["format"] == 0 for t in panel["targets"])
        if panel["type"] == "traces":
            assert all(t["format"] == 3 for t in panel["targets"])


def test_overview_variables() -> None:
    variables = _variables(BOARDS["otel-replay-overview.json"])
    agent = variables["agent"]
    assert agent["type"] == "query" and agent["includeAll"] and agent["datasource"]["uid"] == "${datasource}"
    status = variables["status"]
    assert status["includeAll"] and {o["value"] for o in status["options"]} >= {"ok", "error"}
    assert variables["jaeger_url"]["type"] in ("textbox", "constant")


def _links(panel: dict[str, Any], field: str) -> list[dict[str, Any]]:
    for override in panel["fieldConfig"]["overrides"]:
        if override["matcher"]["options"] == field:
            return next(p["value"] for p in override["properties"] if p["id"] == "links")
    return []


def test_failure_list_links_to_jaeger_and_the_trace_view() -> None:
    board = BOARDS["otel-replay-overview.json"]
    run_board = BOARDS["otel-replay-run.json"]
    failures = next(p for p in _query_panels(board) if p["title"] == "Failed runs")
    urls = [link["url"] for link in _links(failures, "TraceId")]
    assert JAEGER_LINK in urls
    drill = next(u for u in urls if u.startswith("/d/"))
    assert drill.startswith(f"/d/{run_board['uid']}/")
    assert "var-trace_id=${__data.fields.TraceId}" in drill and "var-datasource=${datasource}" in drill
    trace_panels = [p for p in _query_panels(run_board) if p["type"] == "traces"]
    assert trace_panels and trace_panels[0]["targets"][0]["format"] == 3
    assert _variables(run_board)["trace_id"]["type"] == "textbox"


def test_provisioning_provider_parses() -> None:
    provider = yaml.safe_load(PROVIDER.read_text(encoding="utf-8"))
    assert provider["apiVersion"] == 1
    (entry,) = provider["providers"]
    assert entry["type"] == "file"
    assert entry["options"]["path"] == "/var/lib/grafana/dashboards"


# ------------------------------------------------------------------------------------------ queries


@pytest.mark.parametrize(("board_name", "panel_id", "ref_id"), _targets())
def test_query_returns_rows(demo_store: dict[str, Any], board_name: str, panel_id: int, ref_id: str) -> None:
    panel, target = _target(board_name, panel_id, ref_id)
    for scenario, variables in _scenarios(BOARDS[board_name], demo_store).items():
        result = _query(demo_store["store"], target["rawSql"], variables)
        assert result.result_rows, f"{panel['title']!r} ({scenario}) returned no rows"
        if target["format"] == 0:  # time series: a `time` column first, then (string) series, then numbers
            assert result.column_names[0] == "time"
            assert all(isinstance(row[0], datetime) for row in result.result_rows)
        if target["format"] == 3:  # the columns Grafana's trace view reads
            assert set(result.column_names) >= TRACE_COLUMNS
            # startTime and duration in milliseconds (floats), as the plugin's own trace query sends them.
            start = result.column_names.index("startTime")
            assert all(isinstance(row[start], float) and row[start] > 1e12 for row in result.result_rows)


def test_pipeline_row_reads_only_metrics_the_collector_publishes() -> None:
    """The overview's Collector pipeline row: accepted, refused, queue size, failed sends, on real metric names."""
    panels = _prometheus_panels(BOARDS["otel-replay-overview.json"])
    rows = [p for p in _panels(BOARDS["otel-replay-overview.json"]) if p.get("type") == "row"]
    assert any(r["title"] == "Collector pipeline" for r in rows)
    used: set[str] = set()
    for panel in panels:
        for target in panel["targets"]:
            assert target["datasource"] == PROMETHEUS and target["expr"]
            used |= set(re.findall(r"\b(otelcol_[a-z_]+)\b", target["expr"]))
            labels = set(re.findall(r"by \(([a-z_, ]+)\)", target["expr"]))
            for group in labels:
                assert {lab.strip() for lab in group.split(",")} <= set(COLLECTOR_METRICS["labels"]), group
    assert used <= set(COLLECTOR_METRICS["names"]), used - set(COLLECTOR_METRICS["names"])
    for needed in (
        "otelcol_receiver_accepted_spans_total",
        "otelcol_receiver_refused_spans_total",
        "otelcol_exporter_queue_size",
        "otelcol_exporter_send_failed_spans_total",
    ):
        assert needed in used, needed


def test_variable_queries_run(demo_store: dict[str, Any]) -> None:
    for board in BOARDS.values():
        for variable in _variables(board).values():
            if variable["type"] == "query":
                rows = _run(demo_store["store"], variable["query"], {})
                assert rows, f"variable {variable['name']} has no options"
    agent = _variables(BOARDS["otel-replay-overview.json"])["agent"]
    assert [r[0] for r in _run(demo_store["store"], agent["query"], {})] == ["support-agent"]


def _overview_rows(data: dict[str, Any], title: str, **selected: list[str]) -> list[tuple[Any, ...]]:
    board = BOARDS["otel-replay-overview.json"]
    panel = next(p for p in _query_panels(board) if p["title"] == title)
    variables = _scenarios(board, data)["all"]
    for name, values in selected.items():
        variables[name] = Variable(values, variables[name].options)
    return _run(data["store"], panel["targets"][0]["rawSql"], variables)


def test_filters_and_values(demo_store: dict[str, Any]) -> None:
    # 3 originals + 2 replays; errors: the failed original, its mock replay, and the refused live replay.
    assert _overview_rows(demo_store, "Runs") == [(5,)]
    assert _overview_rows(demo_store, "Runs", status=["error"]) == [(3,)]
    assert _overview_rows(demo_store, "Runs", status=["error"], kind=["original"]) == [(1,)]
    assert _overview_rows(demo_store, "Runs", kind=["replay"]) == [(2,)]
    assert _overview_rows(demo_store, "Runs", agent=["no-such-agent"]) == [(0,)]
    failed = {row[1] for row in _overview_rows(demo_store, "Failed runs")}
    assert failed == {demo_store["failed"], demo_store["mock_replay"], demo_store["refused_replay"]}
    assert {row[1] for row in _overview_rows(demo_store, "Failed runs", kind=["original"])} == {demo_store["failed"]}
    audit = _overview_rows(demo_store, "Replay audit: who replayed what, why, how")
    by_trace = {row[-1]: row for row in audit}
    assert set(by_trace) == {demo_store["mock_replay"], demo_store["refused_replay"]}
    refused = by_trace[demo_store["refused_replay"]]
    assert refused[2] == "x" and refused[3] == "live" and refused[6] == "refused"
    assert refused[-2] == demo_store["refund"]
    tools = {(row[0], row[1]): row for row in _overview_rows(demo_store, "Tool calls by risk")}
    refund = tools[("high", "issue_refund")]
    # the original call (approved) and the replay's call, refused by the replay firewall
    assert refund[2] == 2 and refund[4] >= 1 and refund[-1] == 1
    decisions = {row[4] for row in _overview_rows(demo_store, "Approvals and replay refusals")}
    assert decisions == {"approval approved", "refused by replay firewall"}


def test_drill_down_lists_steps_and_snapshots(demo_store: dict[str, Any]) -> None:
    board = BOARDS["otel-replay-run.json"]
    variables = _scenarios(board, demo_store)["refund"]
    panels = {p["title"]: p for p in _query_panels(board)}
    steps = _run(demo_store["store"], panels["Steps"]["targets"][0]["rawSql"], variables)
    assert [row[0] for row in steps] == [0, 1, 2, 3, 4]
    assert steps[3][2] == "issue_refund" and steps[3][13] == "approved"
    events = _run(demo_store["store"], panels["Snapshots and events"]["targets"][0]["rawSql"], variables)
    names = {row[3] for row in events}
    assert {
        "otel_replay.snapshot.input",
        "otel_replay.snapshot.tool",
        "otel_replay.snapshot.output",
        "otel_replay.approval",
    } <= names
    trace = _run(demo_store["store"], panels["Trace"]["targets"][0]["rawSql"], variables)
    assert len(trace) == 6 and {row[0] for row in trace} == {demo_store["refund"]}


# ------------------------------------------------------------------------------------------ expander


def test_expander() -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    end = start + timedelta(hours=1)
    variables = {"agent": Variable([ALL], ["a", "b'c"]), "status": Variable(["ok"], ["ok", "error"])}
    sql = (
        "SELECT $__timeInterval(Timestamp) AS t FROM x WHERE $__timeFilter(Timestamp) "
        "AND $__conditionalAll(agent IN (${agent:singlequote}), $agent) "
        "AND $__conditionalAll(f(status, 1) IN (${status:singlequote}), ${status}) "
        "AND a IN (${agent:singlequote}) AND $__fromTime < $__toTime AND $__interval_s > 0 "
        "AND ts >= $__fromTime_ms"
    )
    out = expand(sql, start=start, end=end, interval_s=30, variables=variables)
    assert "toStartOfInterval(toDateTime(Timestamp), INTERVAL 30 second)" in out
    from_s, to_s = int(start.timestamp()), int(end.timestamp())
    assert f"Timestamp >= toDateTime({from_s}) AND Timestamp <= toDateTime({to_s})" in out
    assert "1=1" in out and "f(status, 1) IN ('ok')" in out
    assert "a IN ('a','b\\'c')" in out
    assert f"ts >= fromUnixTimestamp64Milli({int(start.timestamp()) * 1000})" in out
    with pytest.raises(ExpansionError):
        expand("SELECT $nope", start=start, end=end)
    with pytest.raises(ExpansionError):
        expand("SELECT 1 WHERE $__conditionalAll(a, b, $agent)", start=start, end=end, variables=variables)
    with pytest.raises(ExpansionError):  # the plugin does not recognise a formatted variable there
        expand("SELECT 1 WHERE $__conditionalAll(a IN (1), ${agent:csv})", start=start, end=end, variables=variables)


def _convention_names() -> set[str]:
    from otel_replay import semconv

    names = {value for value in vars(semconv).values() if isinstance(value, str)}
    for value in vars(semconv).values():
        if isinstance(value, type) and issubclass(value, semconv.StrEnum) and value is not semconv.StrEnum:
            names |= {member.value for member in value}
    return names


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_queries_use_only_convention_keys(name: str) -> None:
    """A key renamed in otel_replay/semconv.py must not leave a dashboard silently empty."""
    known = _convention_names()
    used: set[str] = set()
    for panel in _query_panels(BOARDS[name]):
        for target in panel["targets"]:
            used |= set(re.findall(r"'((?:otel_replay|gen_ai|exception|error)\.[a-z0-9_.]+)'", target["rawSql"]))
    assert used
    assert not used - known, f"keys not in otel_replay.semconv: {sorted(used - known)}"


def test_drill_down_quotes_the_trace_id(demo_store: dict[str, Any]) -> None:
    """The textbox value is inserted as an SQL string literal: a quote in it cannot widen the query."""
    board = BOARDS["otel-replay-run.json"]
    variables = _scenarios(board, demo_store)["refund"]
    variables["trace_id"] = Variable("x' OR TraceId != '")
    for panel in _query_panels(board):
        for target in panel["targets"]:
            assert _run(demo_store["store"], target["rawSql"], variables) == [], panel["title"]


# ------------------------------------------------------------------------------- duplicated deliveries

_TABLES = re.compile(r"\botel_traces(_trace_id_ts)?\b")


def _normal(row: tuple[Any, ...]) -> str:
    """A row as text, floats to 12 significant digits: a sum over the same spans read in another order may
    differ in the last bits (0.000488 and 0.00048799999999999994), which is not a duplicate counted twice."""
    return repr(tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row))


def _all_results(store: Store, database: str, data: dict[str, Any]) -> dict[str, list[str]]:
    """Every ClickHouse query of every dashboard, for every scenario, read from ``database``; rows sorted."""
    start, end = _window(store)
    results: dict[str, list[str]] = {}
    for board_name, board in BOARDS.items():
        for scenario, variables in _scenarios(board, data).items():
            for panel in _query_panels(board):
                for target in panel["targets"]:
                    sql = expand(target["rawSql"], start=start, end=end, interval_s=60, variables=variables)
                    sql = _TABLES.sub(lambda m: f"{database}.otel_traces{m.group(1) or ''}", sql)
                    rows = store.client.query(sql).result_rows
                    results[f"{board_name}:{panel['title']}:{target['refId']}:{scenario}"] = sorted(map(_normal, rows))
    return results


def test_dashboard_numbers_ignore_duplicate_spans(demo_store: dict[str, Any]) -> None:
    """Every span stored twice, then three times (SDK retry, Collector restart between insert and ack): every
    dashboard query returns exactly what it returns with each span once."""
    from otel_replay.storage import ddl

    store: Store = demo_store["store"]
    client = store.client
    once = _all_results(store, ddl.DEFAULT_DATABASE, demo_store)
    assert once and all(once.values())
    ((spans,),) = client.query("SELECT count() FROM otel_traces").result_rows
    for copies in (2, 3):
        database = f"dashboards_dup_{copies}"
        client.command(f"DROP DATABASE IF EXISTS {database} SYNC")
        client.command(f"CREATE DATABASE {database}")
        try:
            for statement in ddl.render_script().split(";"):
                body = "\n".join(line for line in statement.splitlines() if not line.lstrip().startswith("--"))
                if body.strip():
                    client.command(body.replace("`default`.", f"`{database}`."))
            for _ in range(copies):
                client.command(f"INSERT INTO {database}.otel_traces SELECT * FROM default.otel_traces")
            # The rows really are there `copies` times (a reader that does not deduplicate would count them).
            ((stored,),) = client.query(f"SELECT count() FROM {database}.otel_traces").result_rows
            assert stored == copies * spans
            again = _all_results(store, database, demo_store)
            differing = sorted(key for key in once if once[key] != again[key])
            assert not differing, f"with every span stored {copies} times these panels change: {differing}"
        finally:
            client.command(f"DROP DATABASE IF EXISTS {database} SYNC")
