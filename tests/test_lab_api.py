"""``otel_replay.lab(...)`` over a real store: the cohort's filters, the unchanged candidate's lab, lanes and
repeats, lineage (``runs --lab``), the lab span, case files as a cohort, and Ctrl-C.

One cohort per module: six runs of the demo support agent (the three demo questions, twice, under two tenants;
two of them end in the demo's unhandled error, two issue a refund, whose real side effect is a line in
``refunds.log``) and three runs of ``lab_agents.counter_agent``. Every lab here runs in this process
(``workers=1``); the worker processes are tested in ``test_lab_cli.py``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lab_agents
import pytest
from cli_in_process import run_cli

import otel_replay as orp
from otel_replay import semconv
from otel_replay.demo import agent as demo

TENANTS = ("acme-eu", "globex")


def _lab_spans(store: Any, lab_id: str) -> list[dict[str, str]]:
    """The attributes of the stored lab spans of ``lab_id`` (read with bound parameters)."""
    rows = store.client.query(
        f"SELECT SpanAttributes FROM {store.traces_table} WHERE SpanName = {{name:String}} "
        "AND SpanAttributes[{key:String}] = {lab:String}",
        parameters={"name": semconv.LAB_SPAN_NAME, "key": semconv.LAB_ID, "lab": lab_id},
    ).result_rows
    return [dict(row[0]) for row in rows]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("lab-api") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_REPLAY_HOME", str(home))
        for name in ("OTEL_REPLAY_STORE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            mp.delenv(name, raising=False)
        mp.delenv(lab_agents.INTERRUPT_ENV, raising=False)
        orp.configure(home=home, exporter="spool")
        for round_ in range(2):
            for question, customer in demo.QUESTIONS:
                with orp.identity(tenant=TENANTS[round_]):
                    try:
                        demo.support_agent(question, customer=customer)
                    except KeyError:
                        pass  # the demo's unknown order, on purpose
        for n in range(3):
            lab_agents.counter_agent(n)
        orp.flush()
        with orp.Store.open() as store:
            runs = store.runs(kind="original", limit=100)
        demo_ids = [r.trace_id for r in runs if r.agent == "support-agent"]
        counter_ids = [r.trace_id for r in runs if r.agent == "counter-agent"]
        assert len(demo_ids) == 6 and len(counter_ids) == 3
        yield {
            "home": home,
            "demo": demo_ids,
            "counter": counter_ids,
            "errors": [r.trace_id for r in runs if r.agent == "support-agent" and r.status == "error"],
            "refunds": (home / "refunds.log").read_text(encoding="utf-8"),
        }


def _by_trace(result: orp.LabResult) -> dict[str, str]:
    return {p.original_trace_id: p.outcome for p in result.pairs}


def test_unchanged_code_matches_every_run_the_gate_passes_and_nothing_really_happens(world: dict[str, Any]) -> None:
    result = orp.lab(agent="support-agent", workers=1, fail_if=["diverged > 0"])

    assert sorted(result.cohort) == sorted(world["demo"])
    assert result.summary["totals"]["matched"] == 6
    assert _by_trace(result) == dict.fromkeys(world["demo"], "matched")
    assert not result.failed and not result.interrupted
    assert [(g.expression, g.held) for g in result.gates] == [("diverged > 0", False)]
    # the refund tool answered from the recording: its real side effect did not happen again
    assert (world["home"] / "refunds.log").read_text(encoding="utf-8") == world["refunds"]
    document = json.loads(json.dumps(result.to_dict()))
    assert document["lab_id"] == result.lab_id and len(document["runs"]) == 6


def test_each_replay_is_a_replay_run_listed_by_runs_lab(world: dict[str, Any]) -> None:
    result = orp.lab(agent="support-agent", workers=1)

    out = run_cli(["runs", "--lab", result.lab_id, "--json"])
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert sorted(r["trace_id"] for r in listed) == sorted(p.replay_trace_id for p in result.pairs)
    assert {r["kind"] for r in listed} == {"replay"}
    assert sorted(r["replay_of"] for r in listed) == sorted(world["demo"])
    with orp.Store.open() as store:
        root = store.load_run(result.pairs[0].replay_trace_id).attributes
    assert root[semconv.REPLAY_LAB_ID] == result.lab_id
    assert root[semconv.REPLAY_LAB_LANE] == "candidate"
    # another lab id lists nothing
    out = run_cli(["runs", "--lab", "0" * 32, "--json"])
    assert out.returncode == 0 and json.loads(out.stdout) == []


def test_the_lab_span_is_stored_once_with_the_cohort_and_totals(world: dict[str, Any]) -> None:
    result = orp.lab(agent="counter-agent", workers=1, reason="nightly backtest", actor="ci-bot")

    with orp.Store.open() as store:
        spans = _lab_spans(store, result.lab_id)
    assert len(spans) == 1
    (span,) = spans
    assert span[semconv.LAB_MODE] == "deterministic"
    assert sorted(json.loads(span[semconv.LAB_COHORT])) == sorted(world["counter"])
    assert span[semconv.LAB_RUNS] == "3" and span[semconv.LAB_MATCHED] == "3" and span[semconv.LAB_DIVERGED] == "0"
    assert span[semconv.LAB_FAILED] == "false" and span[semconv.LAB_INTERRUPTED] == "false"
    assert json.loads(span[semconv.LAB_SCORES])["output_equal"] == 1.0
    assert span[semconv.REPLAY_ACTOR] == "ci-bot" and span[semconv.REPLAY_REASON] == "nightly backtest"
    assert span[semconv.REPLAY_OS_USER]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"status": "error"}, "errors"),
        ({"agent": "counter-agent"}, "counter"),
        ({"agent": "support-agent", "tags": {semconv.TENANT_ID: "globex"}}, "globex"),
    ],
)
def test_cohort_filters_select_exactly_the_matching_original_runs(
    world: dict[str, Any], filters: dict[str, Any], expected: str
) -> None:
    result = orp.lab(workers=1, mode="mock", **filters)

    if expected == "globex":
        with orp.Store.open() as store:
            wanted = [t for t in world["demo"] if store.load_run(t).attributes.get(semconv.TENANT_ID) == "globex"]
        assert len(wanted) == 3
    else:
        wanted = world[expected]
    assert sorted(result.cohort) == sorted(wanted)
    # replays are never part of a cohort, however many labs ran before
    assert all(p.original_trace_id in wanted for p in result.pairs)


def test_trace_ids_limit_and_a_seeded_sample(world: dict[str, Any]) -> None:
    one = orp.lab(trace_ids=[world["counter"][0]], workers=1, mode="mock")
    assert one.cohort == [world["counter"][0]]

    newest = orp.lab(agent="support-agent", limit=2, workers=1, mode="mock")
    assert newest.cohort == world["demo"][:2]  # runs newest first, as `otel-replay runs` lists them

    first = orp.lab(agent="support-agent", sample=3, seed=7, workers=1, mode="mock")
    again = orp.lab(agent="support-agent", sample=3, seed=7, workers=1, mode="mock")
    assert first.cohort == again.cohort and len(first.cohort) == 3
    assert set(first.cohort) <= set(world["demo"])
    draws = {tuple(orp.lab(agent="support-agent", sample=3, seed=s, workers=1, mode="mock").cohort) for s in range(4)}
    assert len(draws) > 1  # the seed decides the draw


def test_since_and_until_bound_the_runs_start(world: dict[str, Any]) -> None:
    tomorrow = (_dt.datetime.now(tz=_dt.timezone.utc) + _dt.timedelta(days=1)).date().isoformat()
    yesterday = (_dt.datetime.now(tz=_dt.timezone.utc) - _dt.timedelta(days=1)).date().isoformat()

    inside = orp.lab(agent="counter-agent", since=yesterday, until=tomorrow, workers=1, mode="mock")
    assert sorted(inside.cohort) == sorted(world["counter"])
    with pytest.raises(orp.ReplayRefused, match="cohort is empty"):
        orp.lab(agent="counter-agent", since=tomorrow, workers=1)
    with pytest.raises(orp.ReplayRefused, match="cohort is empty"):
        orp.lab(agent="counter-agent", until=yesterday, workers=1)


def test_an_empty_cohort_and_bad_values_are_refused_before_anything_runs(world: dict[str, Any]) -> None:
    with pytest.raises(orp.ReplayRefused, match="cohort is empty"):
        orp.lab(agent="no-such-agent", workers=1)
    with pytest.raises(ValueError, match="--inject"):
        orp.lab(agent="counter-agent", inject=["read_number:error=explode"], workers=1)
    with pytest.raises(ValueError, match="--fail-if"):
        orp.lab(agent="counter-agent", fail_if=["diverged >> 0"], workers=1)
    with pytest.raises(orp.ReplayRefused, match="reason"):
        orp.lab(agent="counter-agent", mode="whatif", workers=1)
    with pytest.raises(orp.ReplayRefused, match="no run with trace id"):
        orp.lab(trace_ids=["ab" * 16], workers=1)


def test_baseline_lane_and_repeats_pair_every_run_per_lane_and_repeat(world: dict[str, Any]) -> None:
    result = orp.lab(agent="counter-agent", baseline=True, repeats=2, workers=1)

    lanes = [(p.lane, p.repeat) for p in result.pairs]
    assert lanes == [("baseline", 0)] * 3 + [("baseline", 1)] * 3 + [("candidate", 0)] * 3 + [("candidate", 1)] * 3
    assert {p.outcome for p in result.pairs} == {"matched"}
    assert result.summary["totals"]["replays"] == 6  # the candidate lane's replays
    with orp.Store.open() as store:
        baseline = store.load_run(result.pairs[0].replay_trace_id).attributes
    assert baseline[semconv.REPLAY_LAB_LANE] == "baseline"
    assert baseline[semconv.REPLAY_LAB_ID] == result.lab_id


def test_case_files_are_a_cohort_without_a_store(world: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    for trace_id in world["counter"][:2]:
        out = run_cli(["case", "export", trace_id, "--output", str(folder / f"c{trace_id[:6]}.case.json")])
        assert out.returncode == 0, out.stderr

    result = orp.lab(cases=[str(folder)], workers=1, fail_if=["diverged > 0"])

    assert sorted(result.cohort) == sorted(world["counter"][:2])
    assert _by_trace(result) == dict.fromkeys(world["counter"][:2], "matched")
    assert not result.failed


def test_ctrl_c_stops_the_lab_and_keeps_what_finished(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    with orp.Store.open() as store:
        inputs = {t: store.load_run(t).snapshots["input"]["args"][0] for t in world["counter"]}
    order = world["counter"]  # newest first: the lab replays them in this order
    monkeypatch.setenv(lab_agents.INTERRUPT_ENV, str(inputs[order[1]]))

    result = orp.lab(agent="counter-agent", workers=1)

    assert result.interrupted
    assert [p.original_trace_id for p in result.pairs] == order[:1]
    assert result.pairs[0].outcome == "matched"
    assert result.cohort == order
    with orp.Store.open() as store:
        (span,) = _lab_spans(store, result.lab_id)
    assert span[semconv.LAB_INTERRUPTED] == "true" and span[semconv.LAB_RUNS] == "1"


def test_hostile_tag_filters_are_values_never_sql(world: dict[str, Any]) -> None:
    hostile = {"x'] = '' OR 1=1 --": "' OR '1'='1", semconv.TENANT_ID: "globex' OR ''='"}
    with pytest.raises(orp.ReplayRefused, match="cohort is empty"):
        orp.lab(tags=hostile, workers=1)
    with orp.Store.open() as store:  # nothing was dropped or changed
        assert len(store.runs(kind="original", limit=100)) == 9


def test_a_lab_that_runs_tools_for_real_is_journaled_once_before_it_replays(world: dict[str, Any]) -> None:
    from otel_replay.replay.safety import journal

    before = len(journal.read(world["home"]))
    result = orp.lab(agent="counter-agent", tool_live=["read_number"], reason="tool check", workers=1)

    records = journal.read(world["home"])[before:]
    labs = [r for r in records if r.get("record") == "lab"]
    assert len(labs) == 1
    (record,) = labs
    assert record["lab_id"] == result.lab_id and record["reason"] == "tool check"
    assert record["cohort"] == result.cohort and record["tools_live"] == ["read_number"]
    assert journal.record_valid(record)
    assert records[0] is record  # written before the first replay
    # each replay that ran a tool for real journaled itself too: the lab's record never stands in for it
    started = [r for r in records if r.get("record") == "started"]
    assert sorted(r["original_trace_id"] for r in started) == sorted(result.cohort)
    assert {r["reason"] for r in started} == {"tool check"}


def test_a_lab_whose_journal_record_cannot_be_written_replays_nothing(world: dict[str, Any]) -> None:
    journal_file = world["home"] / "audit" / "journal.jsonl"
    journal_file.parent.mkdir(mode=0o700, exist_ok=True)
    kept = journal_file.with_name("journal.kept")
    if journal_file.exists():
        journal_file.rename(kept)
    journal_file.mkdir()  # where the journal should be, a folder: the record cannot be written
    with orp.Store.open() as store:
        before = len(store.runs(kind="replay", limit=10_000))
    try:
        with pytest.raises(orp.ReplayRefused, match="audit record of this lab"):
            orp.lab(agent="counter-agent", tool_live=["read_number"], reason="tool check", workers=1)
    finally:
        journal_file.rmdir()
        if kept.exists():
            kept.rename(journal_file)
    with orp.Store.open() as store:
        assert len(store.runs(kind="replay", limit=10_000)) == before
