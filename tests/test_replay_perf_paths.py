"""The replay's quicker paths give exactly what the slower ones gave.

The engine builds the replay's ``Run`` from the rows it inserted (or, on the spool's way, from the spans it saw
once the store confirms it holds exactly those spans) instead of reading the trace back from the store: that
run must equal the one the store returns, and its records must equal what the store reads of the SDK-encoded
spans, for every kind of attribute value.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, TraceState

import otel_replay as orp
from otel_replay.exporting.rows import (
    record_from_query_row,
    rows_from_request,
)
from otel_replay.replay import storing
from otel_replay.storage.store import Store

SCALARS: dict[str, Any] = {
    "text": "plain",
    "accents": "café ☕ \u2028 line",
    "html_json": '{"a":"\\u003cb\\u003e \\u0026"}',
    "html_json_escaped_backslash": '["\\\\u003c"]',
    "empty": "",
    "yes": True,
    "no": False,
    "int": 42,
    "negative": -(1 << 63),
    "float": 0.1,
    "whole_float": 3.0,
    "tiny": 1e-7,
    "huge": 1e21,
    "minus_zero": -0.0,
    "nan": math.nan,
    "inf": -math.inf,
}
"""Values mapped by the engine itself."""

UNUSUAL: dict[str, Any] = {
    "surrogate": "bad \ud800 text",
    "strings": ("a", "é", "<b>"),
    "numbers": (1.5, 2.0),
    "not_json": (1.0, math.nan),
    "bools": (True, False),
    "no_items": (),
    "too_big": 1 << 70,
}
"""Values left to the OTLP encoder and the store mapping: their spans take the slower path."""


def odd_spans() -> list[ReadableSpan]:
    """Spans of two resources and two scopes holding every kind of value, events, links, statuses, kinds; in
    each scope, one span holds unusual span attributes and one an unusual event attribute."""
    spans: list[ReadableSpan] = []
    for service in ("svc-a", "svc-b"):
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": service, "deploy": 3}))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        for scope, version in (("otel_replay", "0.1.0"), ("other", None)):
            tracer = provider.get_tracer(scope, version)
            with tracer.start_as_current_span("root", attributes={"otel_replay.run.id": "r1"}) as root:
                root.add_event(
                    "otel_replay.snapshot.input",
                    {"otel_replay.snapshot.payload": '{"q":"hi"}', "otel_replay.snapshot.seq": 1},
                )
                for i, kind in enumerate(SpanKind):
                    link = Link(root.get_span_context(), {"why": "because", "n": i})
                    attributes = {**SCALARS, "i": i, **(UNUSUAL if i == 1 else {})}
                    with tracer.start_as_current_span(
                        f"step {i}", kind=kind, links=[link], attributes=attributes
                    ) as span:
                        span.add_event("odd", {**SCALARS, **(UNUSUAL if i == 2 else {})})
                        span.add_event("plain")
                        if i % 2:
                            span.set_status(Status(StatusCode.ERROR, "it failed"))
                        elif i:
                            span.set_status(Status(StatusCode.OK))
            ctx = root.get_span_context()
            state = TraceState([("vendor", "v1"), ("other", "x")])
            traced = tracer.start_span("with state", context=None)
            traced._context = type(ctx)(ctx.trace_id, 0x1234, ctx.is_remote, ctx.trace_flags, state)
            traced.end()
        spans.extend(memory.get_finished_spans())
        provider.shutdown()
    return spans


def test_stored_records_equal_what_the_store_mapping_reads_of_the_sdk_encoded_spans() -> None:
    spans = odd_spans()
    expected = sorted(
        (record_from_query_row(row) for row in rows_from_request(encode_spans(spans))),
        key=lambda r: (r.timestamp_ns, r.span_id),
    )
    assert len(expected) == len(spans) == 28
    records = storing.stored_records(spans)
    assert records == expected
    # float text and key order are part of the equality, not only the values
    assert [list(r.span_attributes) for r in records] == [list(r.span_attributes) for r in expected]
    html = [r.span_attributes["html_json"] for r in records if "html_json" in r.span_attributes]
    assert html and all(value == '{"a":"<b> &"}' for value in html)  # read back as the store reads it
    assert not any("surrogate" in r.span_attributes or "too_big" in r.span_attributes for r in records)


# ------------------------------------------------------------------------------ a replay against a store


@orp.tool("perf_lookup", risk="read")
def perf_lookup(key: str) -> dict[str, Any]:
    return {"key": key, "text": "café <b> & \u2028", "html": '{"a":"\\u003cb\\u003e"}', "ratio": 0.1}


@orp.model("perf_plan", provider="scripted", model="scripted-1")
def perf_plan(prompt: str) -> dict[str, Any]:
    return {"text": f"plan {prompt}", "usage": {"input_tokens": 3, "output_tokens": 2}}


@orp.tool("perf_fail", risk="read")
def perf_fail(key: str) -> str:
    raise KeyError(key)


@orp.agent("perf-paths-agent")
def perf_agent(question: str) -> dict[str, Any]:
    at, ident = orp.now(), orp.new_uuid()
    plan = perf_plan(question)
    found = [perf_lookup(f"k{i}") for i in range(3)]
    try:
        perf_fail("missing")
    except KeyError:
        pass
    return {"answer": plan["text"], "found": found, "at": at.isoformat(), "id": str(ident)}


@pytest.fixture
def recorded(home: Path) -> str:
    perf_agent("why")
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs()
    return summary.trace_id


def counting_loads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    loads: list[str] = []
    load_run = store.load_run

    def counted(trace_id: str) -> Any:
        loads.append(trace_id)
        return load_run(trace_id)

    monkeypatch.setattr(store, "load_run", counted)
    return loads


def test_the_replay_built_from_its_spans_equals_the_stored_replay(
    recorded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store.open() as store:
        loads = counting_loads(store, monkeypatch)
        result = orp.replay(recorded, mode="mock", store=store)
        assert loads == [recorded]  # the replay was not read back from the store
        monkeypatch.undo()
        stored = store.load_run(result.replay_trace_id)
        assert result.outcome == "matched", result.to_dict()["divergences"]
        assert result.replay == stored
        assert result.replay.spans == stored.spans and result.replay.steps == stored.steps
        assert result.diff == orp.diff(recorded, result.replay_trace_id, store=store)


def test_the_store_is_read_when_it_does_not_hold_exactly_the_spans_seen(
    recorded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A replay with the side-effect guard off goes through the spool (it may cause real effects, so its spans
    # must survive the process being killed half-way): the store is asked which spans it holds.
    with Store.open() as store:
        loads = counting_loads(store, monkeypatch)
        holds = store.existing_span_ids

        def one_missing(trace_ids: Any) -> set[tuple[str, str]]:
            found = holds(trace_ids)
            return set(sorted(found)[1:])

        monkeypatch.setattr(store, "existing_span_ids", one_missing)
        result = orp.replay(recorded, mode="mock", store=store, allow_side_effects=True)
        assert loads == [recorded, result.replay_trace_id]
        monkeypatch.undo()
        assert result.replay == store.load_run(result.replay_trace_id)


def test_the_garbage_collector_is_left_as_it_was(recorded: str) -> None:
    import gc

    with Store.open() as store:
        assert gc.isenabled()
        orp.replay(recorded, mode="mock", store=store)
        assert gc.isenabled()
        gc.disable()
        try:
            orp.replay(recorded, mode="mock", store=store)
            assert not gc.isenabled()  # not switched on by a replay when the caller had it off
        finally:
            gc.enable()
        from otel_replay._gc import gc_paused

        with gc_paused():  # nested pauses (the engine's and ingest's) share one
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()


@orp.tool("perf_stamp", risk="read")
def perf_stamp(i: int) -> str:
    return f"{i}:{orp.new_uuid()}"  # drawn inside the step: a mock replay answers the step and skips it


@orp.agent("perf-values-agent")
def values_agent(count: int) -> dict[str, Any]:
    drawn = [[str(orp.new_uuid()), perf_stamp(i), orp.random(), orp.now().isoformat()] for i in range(count)]
    return {"answer": "done", "drawn": drawn}


def test_values_drawn_inside_answered_steps_are_skipped_in_order(home: Path) -> None:
    values_agent(60)
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs()
        original = store.load_run(summary.trace_id)
        result = orp.replay(summary.trace_id, mode="mock", store=store)
    assert result.outcome == "matched", result.to_dict()["divergences"]
    drawn = result.replay.snapshots["output"]["structured"]["drawn"]
    assert drawn == original.snapshots["output"]["structured"]["drawn"]
    assert len({d[0] for d in drawn}) == 60


def test_snapshots_are_joined_from_their_chunks_and_missing_chunks_reported() -> None:
    from otel_replay import semconv
    from otel_replay.records import EventRecord, SpanRecord
    from otel_replay.runs import build_run
    from otel_replay.snapshots import sha256_hex

    def span(span_id: str, parent: str, attributes: dict[str, str], events: list[EventRecord]) -> SpanRecord:
        return SpanRecord(
            timestamp_ns=1_000 + len(span_id),
            trace_id="a" * 32,
            span_id=span_id,
            parent_span_id=parent,
            trace_state="",
            span_name="s",
            span_kind="Internal",
            service_name="svc",
            resource_attributes={},
            scope_name="",
            scope_version="",
            span_attributes=attributes,
            duration_ns=5,
            status_code="Ok",
            status_message="",
            events=tuple(events),
        )

    def chunk(kind: str, seq: str, index: int, count: int, text: str, digest: str) -> EventRecord:
        return EventRecord(
            timestamp_ns=2_000 + index,
            name=semconv.SNAPSHOT_EVENT_PREFIX + kind,
            attributes={
                semconv.SNAPSHOT_SEQ: seq,
                semconv.SNAPSHOT_CHUNK_INDEX: str(index),
                semconv.SNAPSHOT_CHUNK_COUNT: str(count),
                semconv.SNAPSHOT_PAYLOAD: text,
                semconv.SNAPSHOT_SHA256: digest,
            },
        )

    whole = '{"result":"' + "x" * 30 + '"}'
    parts = [whole[:10], whole[10:25], whole[25:]]
    digest = sha256_hex(whole)
    tool_events = [
        chunk("tool", "2", 2, 3, parts[2], digest),
        chunk("tool", "2", 0, 3, parts[0], digest),
        EventRecord(timestamp_ns=2_500, name="other"),
        chunk("tool", "2", 1, 3, parts[1], digest),
        chunk("state", "3", 1, 2, '"b"}', ""),
    ]
    run = build_run(
        [
            span(
                "1" * 16,
                "",
                {semconv.RUN_ID: "r"},
                [chunk("input", "1", 0, 1, '{"args":[]}', sha256_hex('{"args":[]}'))],
            ),
            span("2" * 16, "1" * 16, {semconv.STEP_INDEX: "0", "otel_replay.step.kind": "tool"}, tool_events),
        ]
    )
    (step,) = run.steps
    assert run.snapshots == {"input": {"args": []}}
    assert step.snapshots["tool"] == {"result": "x" * 30}
    assert [s.kind for s in step.snapshot_list] == ["tool", "state"]
    assert [s.intact for s in step.snapshot_list] == [True, False]
    assert [e.name for e in step.events] == ["other"]
    assert run.problems == ("step 0: state snapshot has 1 of 2 chunks", "step 0: state snapshot is not valid JSON")
