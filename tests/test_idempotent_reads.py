"""A span stored twice or three times reads as one span, whatever reads it.

At-least-once delivery stores the same span more than once: an SDK retries a batch the Collector had already
inserted, a Collector restarts between its insert and its acknowledgement. A run is recorded for real (the
decorators, model calls reporting tokens and cost, a tool call), replayed once in mock mode, and every span in
the store is then written again: once through the store's own insert path (the rows the one span encoder
makes from the stored records), and once more as the Collector would send a retried batch (the same rows
again, copied unchanged). After each round, ``show --json``, the ``runs --json`` entry, a mock replay, the
diff and the exported case file are exactly what they were with each span stored once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import run_cli

import otel_replay as orp
from otel_replay import semconv
from otel_replay.storage.store import Store

TESTS_DIR = Path(__file__).resolve().parent


@orp.model("idem_plan", provider="scripted", model="scripted-1")
def idem_plan(question: str) -> dict[str, Any]:
    return {"text": f"look up {question}", "usage": {"input_tokens": 120, "output_tokens": 30, "cost_usd": 0.0021}}


@orp.tool("idem_lookup", risk="read")
def idem_lookup(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped"}


@orp.model("idem_answer", provider="scripted", model="scripted-1")
def idem_answer(found: dict[str, Any]) -> dict[str, Any]:
    return {"text": f"order {found['status']}", "usage": {"input_tokens": 80, "output_tokens": 12, "cost_usd": 0.0009}}


@orp.agent("idempotent-reads-agent")
def idem_agent(question: str) -> str:
    plan = idem_plan(question)
    found = idem_lookup(plan["text"].rsplit(" ", 1)[-1])
    return str(idem_answer(found)["text"])


def _cli(home: Path, *args: str) -> str:
    env = {**os.environ, "OTEL_REPLAY_HOME": str(home)}
    env.pop("OTEL_REPLAY_STORE", None)
    out = run_cli(args, env=env, cwd=TESTS_DIR.parent)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _replay_outcome(result: Any) -> dict[str, Any]:
    """What a mock replay concluded, without the fresh replay's ids and times."""
    assert result.replay is not None
    return {
        "outcome": result.outcome,
        "divergences": [repr(d) for d in result.divergences],
        "executions": result.executions,
        "steps": [(s.index, s.kind, s.name, s.status) for s in result.replay.steps],
        "replay_spans": len(result.replay.spans),
    }


def _observe(home: Path, trace_id: str, replay_id: str, case_path: Path) -> dict[str, Any]:
    """Everything a user reads about the run: show, its runs entry, a new mock replay, the diff, the case file."""
    with Store.open() as store:
        replayed = orp.replay(trace_id, mode="mock", store=store, reason="idempotent reads")
        original = store.load_run(trace_id)
    shown = json.loads(_cli(home, "show", trace_id, "--json"))
    listed = json.loads(_cli(home, "runs", "--json", "--kind", "original"))
    entries = [entry for entry in listed if entry["trace_id"] == trace_id]
    diff = json.loads(_cli(home, "diff", trace_id, replay_id, "--json"))
    case_path.unlink(missing_ok=True)
    _cli(home, "case", "export", trace_id, "-o", str(case_path))
    return {
        "show": shown,
        "runs": entries,
        "originals_listed": len(listed),
        "load_run": (len(original.steps), len(original.spans), original.problems),
        "replay": _replay_outcome(replayed),
        "diff": diff,
        "case": case_path.read_bytes(),
    }


def _stored_rows(store: Store) -> int:
    return int(store.client.query(f"SELECT count() FROM {store.traces_table}").result_rows[0][0])


@pytest.fixture
def recorded(home: Path) -> dict[str, Any]:
    """The run and one mock replay of it, stored once each."""
    assert idem_agent("o-77") == "order shipped"
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(kind="original")
        result = orp.replay(summary.trace_id, mode="mock", store=store, reason="baseline")
        assert result.outcome == "matched" and result.replay_trace_id
        traces = [summary.trace_id, result.replay_trace_id]
    return {"trace_id": summary.trace_id, "replay_id": result.replay_trace_id, "traces": traces}


def test_every_reader_counts_a_span_stored_two_and_three_times_once(
    home: Path, recorded: dict[str, Any], tmp_path: Path
) -> None:
    trace_id, replay_id = recorded["trace_id"], recorded["replay_id"]
    case_path = tmp_path / "cases" / "idem.case.json"
    once = _observe(home, trace_id, replay_id, case_path)
    # The recorded run carries what the comparison must hold still: steps, tokens, cost, a tool call.
    (entry,) = once["runs"]
    assert entry["step_count"] == 3 and entry["status"] == "ok"
    attributes = once["show"]["attributes"]
    assert float(attributes[semconv.RUN_COST_USD]) == pytest.approx(0.003)
    assert int(attributes[semconv.RUN_INPUT_TOKENS]) == 200 and int(attributes[semconv.RUN_OUTPUT_TOKENS]) == 42
    assert once["originals_listed"] == 1
    assert [step["kind"] for step in once["show"]["steps"]] == ["model", "tool", "model"]

    with Store.open() as store:
        spans = {tid: store.load_spans(tid) for tid in recorded["traces"]}
        rows = _stored_rows(store)
        # Twice: every span of the run and of its replay again, through the store's insert path (the one
        # span encoder turning the stored records back into rows).
        for records in spans.values():
            assert records
            store.insert_spans(records)
        assert _stored_rows(store) == rows + sum(len(r) for r in spans.values())
    twice = _observe(home, trace_id, replay_id, case_path)

    with Store.open() as store:
        rows = _stored_rows(store)
        # Three times: the same rows once more, copied unchanged, as a Collector retrying a batch inserts them.
        store.client.command(
            f"INSERT INTO {store.traces_table} SELECT * FROM {store.traces_table} "
            "WHERE TraceId IN {ids:Array(String)} LIMIT 1 BY TraceId, SpanId",
            parameters={"ids": recorded["traces"]},
        )
        assert _stored_rows(store) == rows + sum(len(r) for r in spans.values())
        copies = store.client.query(
            f"SELECT min(n), max(n) FROM (SELECT count() AS n FROM {store.traces_table} "
            "WHERE TraceId = {t:String} GROUP BY SpanId)",
            parameters={"t": trace_id},
        ).result_rows[0]
        assert tuple(copies) == (3, 3)
    three_times = _observe(home, trace_id, replay_id, case_path)

    for label, seen in (("twice", twice), ("three times", three_times)):
        changed = sorted(key for key in once if key != "originals_listed" and once[key] != seen[key])
        assert not changed, f"with every span stored {label}, these readers changed: {changed}"
        assert seen["originals_listed"] == 1, f"with every span stored {label}, the original run is listed again"


def test_the_run_listing_lists_a_run_stored_twice_once(home: Path, recorded: dict[str, Any]) -> None:
    """The listing's limit counts runs, not rows: a duplicated root does not push another run out."""
    assert idem_agent("o-78") == "order shipped"
    orp.flush()
    with Store.open() as store:
        newest, older = store.runs(kind="original", limit=2)
        assert older.trace_id == recorded["trace_id"]
        store.insert_spans(store.load_spans(newest.trace_id))
        listed = store.runs(kind="original", limit=2)
        assert [s.trace_id for s in listed] == [newest.trace_id, older.trace_id]
        assert [s.trace_id for s in store.run_rows(limit=10)].count(newest.trace_id) == 1
