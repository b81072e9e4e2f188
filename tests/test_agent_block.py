"""``orp.agent`` as a context manager: the with-form of a run for code with no single function to decorate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import otel_replay as orp
from otel_replay import semconv


@pytest.fixture
def mem(home: Path) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    orp.configure(exporter=exporter, home=home)
    return exporter


def _spans(mem: InMemorySpanExporter) -> list[ReadableSpan]:
    orp.flush()
    return list(mem.get_finished_spans())


def _snapshot(span: ReadableSpan, kind: str) -> Any:
    parts = [e.attributes for e in span.events if e.name == semconv.snapshot_event_name(kind)]
    return json.loads("".join(str(a[semconv.SNAPSHOT_PAYLOAD]) for a in parts))


@orp.tool
def lookup(city: str) -> str:
    return f"sunny in {city}"


def test_the_block_is_one_run_with_its_input_output_and_steps(mem: InMemorySpanExporter) -> None:
    with orp.agent("loop-agent", input="Weather in Paris?") as run:
        run.output = lookup("Paris")
        run_id, trace_id = run.run_id, run.trace_id
    spans = _spans(mem)
    root = next(s for s in spans if s.parent is None)
    assert root.name == "invoke_agent loop-agent" and root.status.status_code is StatusCode.OK
    assert root.attributes[semconv.RUN_ID] == run_id and f"{root.context.trace_id:032x}" == trace_id
    assert root.attributes[semconv.RUN_ENTRYPOINT] == ""
    assert _snapshot(root, "input")["args"] == ["Weather in Paris?"]
    assert _snapshot(root, "output")["answer"] == "sunny in Paris"
    tool = next(s for s in spans if s.parent is not None)
    assert tool.attributes[semconv.STEP_KIND] == "tool" and tool.context.trace_id == root.context.trace_id


def test_an_exception_ends_the_run_as_error_and_propagates_unchanged(mem: InMemorySpanExporter) -> None:
    with pytest.raises(KeyError, match="missing"), orp.agent("loop-agent", input="x"):
        raise KeyError("missing")
    root = next(s for s in _spans(mem) if s.parent is None)
    assert root.status.status_code is StatusCode.ERROR


def test_a_block_inside_a_run_is_a_nested_agent_step_and_async_with_works(mem: InMemorySpanExporter) -> None:
    @orp.agent("outer")
    def outer() -> str:
        with orp.agent("inner", input="q") as block:
            block.output = "a"
        return "done"

    async def in_async() -> None:
        async with orp.agent("async-loop", input="q") as block:
            block.output = lookup("Rome")

    outer()
    asyncio.run(in_async())
    spans = _spans(mem)
    roots = sorted(s.name for s in spans if s.parent is None)
    assert roots == ["invoke_agent async-loop", "invoke_agent outer"]
    nested = [s for s in spans if s.attributes.get(semconv.STEP_KIND) == "agent"]
    assert [s.attributes[semconv.STEP_NAME] for s in nested] == ["inner"]


def test_input_is_only_for_the_with_form(home: Path) -> None:
    with pytest.raises(TypeError, match="with-form"):

        @orp.agent("x", input="q")
        def f() -> None: ...

    with pytest.raises(TypeError, match="string"):
        orp.agent(3)  # type: ignore[arg-type]
    assert orp.agent("named")(lambda: 1)() == 1
