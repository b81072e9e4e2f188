"""A mock replay goes straight into the store it was given, and is stored there once, whatever goes wrong.

The replay's spans are encoded by the one span encoder and inserted by the engine (no spool segment, no
ingest, no read back): the run the replay returns is the one the store returns, it is audited, and opening
the store again (which ingests the spool) adds nothing. When the store stops answering during the replay,
the spans reach it through the spool on its next open, once; a span of the replay's trace started outside the
replay's context goes through the spool too, and the replay still returns (and the store holds) all of them.
While the replayed agent runs, the objects that existed before (the loaded run) are frozen out of the garbage
collector's full collections, and handed back afterwards, unless the host program froze objects itself.
"""

from __future__ import annotations

import contextvars
import gc
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

import otel_replay as orp
from otel_replay.exporting import setup
from otel_replay.replay.safety.audit import audit
from otel_replay.storage.store import Store

DURING_REPLAY: dict[str, Any] = {}
"""What the agent does when it runs again: ``close`` (a store to close), ``side_span`` (True), ``frozen``
(note how many objects the garbage collector keeps frozen)."""


@orp.tool("straight_lookup", risk="read")
def straight_lookup(key: str) -> dict[str, Any]:
    return {"key": key, "text": "café <b> & \u2028", "html": '{"a":"\\u003cb\\u003e"}'}


@orp.model("straight_plan", provider="scripted", model="scripted-1")
def straight_plan(prompt: str) -> dict[str, Any]:
    return {"text": f"plan {prompt}", "usage": {"input_tokens": 3, "output_tokens": 2}}


def _side_span() -> None:
    """A span of the current trace started where no otel-replay runtime is active (only the OTel context)."""
    parent = otel_context.get_current()

    def start() -> None:
        trace.get_tracer("straight-store-test").start_span("side work", context=parent).end()

    contextvars.Context().run(start)


@orp.agent("straight-store-agent")
def straight_agent(question: str) -> dict[str, Any]:
    plan = straight_plan(question)
    found = [straight_lookup(f"k{i}") for i in range(4)]
    store = DURING_REPLAY.pop("close", None)
    if store is not None:
        store.close()  # the store stops answering before the replay is stored
    if DURING_REPLAY.pop("side_span", False):
        _side_span()
    if "frozen" in DURING_REPLAY:
        DURING_REPLAY["frozen"] = gc.get_freeze_count()
    if DURING_REPLAY.pop("host_freeze", False):
        gc.freeze()  # the host program freezes its objects while the replay runs
    if DURING_REPLAY.pop("exit", False):
        raise SystemExit(3)  # passes the engine, which only takes Exception from the agent as a result
    return {"answer": plan["text"], "found": found}


@pytest.fixture
def recorded(home: Path) -> str:
    DURING_REPLAY.clear()
    straight_agent("why")
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs()
    return summary.trace_id


def spool_files(home: Path) -> list[str]:
    spool = home / "spool"
    return sorted(p.name for p in spool.iterdir() if p.suffix != ".lock") if spool.is_dir() else []


def stored_rows(store: Store, trace_id: str) -> tuple[int, int]:
    """(rows, distinct span ids) the store holds for ``trace_id``."""
    result = store.client.query(
        f"SELECT count(), uniqExact(SpanId) FROM {store.traces_table} WHERE TraceId = {{t:String}}",
        parameters={"t": trace_id},
    )
    rows, distinct = result.result_rows[0]
    return int(rows), int(distinct)


def test_a_mock_replay_is_stored_once_without_the_spool_and_audited(home: Path, recorded: str) -> None:
    assert spool_files(home) == []
    exported: list[ReadableSpan] = []
    with Store.open() as store:
        with setup.tap(exported.append):  # what the configured exporter (the spool) is handed
            result = orp.replay(recorded, mode="mock", store=store, reason="straight")
        assert result.outcome == "matched", result.to_dict()["divergences"]
        replay_id = result.replay_trace_id
        assert replay_id is not None and result.replay is not None
        assert not [s for s in exported if s.context and f"{s.context.trace_id:032x}" == replay_id]
        assert spool_files(home) == []
        assert result.replay == store.load_run(replay_id)
        spans = len(result.replay.spans)
        assert spans == 6 and stored_rows(store, replay_id) == (spans, spans)
        assert result.diff == orp.diff(recorded, replay_id, store=store)
        (entry,) = [e for e in audit(store=store) if e.replay_trace_id == replay_id]
        assert entry.mac_valid and entry.mode == "mock" and entry.reason == "straight"
        assert entry.outcome == "matched" and entry.original_trace_id == recorded
        assert stored_rows(store, recorded) == (6, 6)  # the original's rows are untouched
    with Store.open() as store:  # opening ingests the spool: nothing of the replay is added twice
        assert stored_rows(store, replay_id) == (spans, spans)


def test_a_replay_the_store_cannot_take_reaches_it_through_the_spool_once(home: Path, recorded: str) -> None:
    store = Store.open()
    try:
        DURING_REPLAY["close"] = store
        result = orp.replay(recorded, mode="mock", store=store)
    finally:
        store.close()
    assert not DURING_REPLAY
    assert result.outcome == "matched", result.to_dict()["divergences"]
    replay_id = result.replay_trace_id
    assert replay_id is not None and result.replay is not None  # rebuilt from the spans this process saw
    assert spool_files(home)  # kept for the next ingest
    with Store.open() as reopened:
        assert spool_files(home) == []
        stored = reopened.load_run(replay_id)
        assert stored_rows(reopened, replay_id) == (len(stored.spans), len(stored.spans))
        assert [(s.index, s.kind, s.name) for s in stored.steps] == [
            (s.index, s.kind, s.name) for s in result.replay.steps
        ]
        (entry,) = [e for e in audit(store=reopened) if e.replay_trace_id == replay_id]
        assert entry.mac_valid and entry.outcome == "matched"


def test_a_replay_whose_agent_exits_keeps_what_it_recorded(home: Path, recorded: str) -> None:
    with Store.open() as store:
        DURING_REPLAY["exit"] = True
        with pytest.raises(SystemExit):
            orp.replay(recorded, mode="mock", store=store)
        assert not DURING_REPLAY
    with Store.open() as reopened:  # the spool's way: what the replay recorded is stored
        (summary,) = reopened.runs(kind="replay")
        replayed = reopened.load_run(summary.trace_id)
    assert replayed.summary.replay_of == recorded
    assert [s.name for s in replayed.steps] == ["straight_plan"] + ["straight_lookup"] * 4


def test_a_span_of_the_replay_started_outside_its_context_is_stored_with_it(home: Path, recorded: str) -> None:
    with Store.open() as store:
        DURING_REPLAY["side_span"] = True
        result = orp.replay(recorded, mode="mock", store=store)
        assert not DURING_REPLAY
        replay_id = result.replay_trace_id
        assert replay_id is not None and result.replay is not None
        assert "side work" in [s.span_name for s in result.replay.spans]
        assert result.replay == store.load_run(replay_id)
        spans = len(result.replay.spans)
        assert spans == 7 and stored_rows(store, replay_id) == (spans, spans)
    with Store.open() as store:
        assert stored_rows(store, replay_id) == (spans, spans)


def test_the_loaded_run_is_frozen_only_while_the_agent_runs_and_a_host_freeze_is_kept(recorded: str) -> None:
    assert gc.get_freeze_count() == 0
    with Store.open() as store:
        DURING_REPLAY["frozen"] = None
        assert orp.replay(recorded, mode="mock", store=store).outcome == "matched"
        assert DURING_REPLAY.pop("frozen") > 0  # the loaded run was out of the collector's sight
        assert gc.get_freeze_count() == 0  # and handed back
        gc.freeze()  # the host program froze objects of its own: the replay leaves them frozen
        try:
            frozen = gc.get_freeze_count()
            DURING_REPLAY["frozen"] = None
            assert orp.replay(recorded, mode="mock", store=store).outcome == "matched"
            assert DURING_REPLAY.pop("frozen") <= frozen  # nothing more frozen (the loaded run is not)
            assert 0 < gc.get_freeze_count() <= frozen  # and the host's objects are not handed back
        finally:
            gc.unfreeze()
        DURING_REPLAY["host_freeze"] = True
        try:
            assert orp.replay(recorded, mode="mock", store=store).outcome == "matched"
            assert not DURING_REPLAY
            assert gc.get_freeze_count() > 0  # a freeze made during the replay is not undone by it
        finally:
            gc.unfreeze()
