"""The LangGraph benchmark's floor (``benchmarks/langgraph_overhead.py --floor``) records what otel-replay records.

The floor is a minimal hand-written OTel instrumentation of the benchmark's agent; its ratio is only a floor
for otel-replay's if it records the same run (the same spans, attributes, snapshot events and payloads). These
tests run the benchmark's own check against a real recording and show that the check notices a floor that
records less, and that the floor's spans reach its spool segment.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import langchain_openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
import langgraph  # noqa: F401 - a package of the [test] extra: missing, the module fails
import pytest
from fake_llm_servers import FakeLLMServer

from otel_replay.exporting.spool import read_segment, sealed_segments

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, ModuleType]]:
    """The benchmark module and the floor module, imported from benchmarks/ as the script imports them."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("langgraph_overhead", "langgraph_floor"):
        sys.modules.pop(name, None)
    import langgraph_floor  # type: ignore[import-not-found]
    import langgraph_overhead  # type: ignore[import-not-found]

    yield langgraph_overhead, langgraph_floor
    for name in ("langgraph_overhead", "langgraph_floor"):
        sys.modules.pop(name, None)


@pytest.fixture
def agent(home: Path, bench: tuple[ModuleType, ModuleType]) -> Iterator[Any]:
    with FakeLLMServer(tool_args_for={"get_weather": {"city": "Lyon"}, "get_time": {"city": "Lyon"}}) as server:
        yield bench[0].build_agent(server.openai_url)


def test_the_floor_records_the_same_run_as_otel_replay(agent: Any, bench: tuple[ModuleType, ModuleType]) -> None:
    assert bench[0].floor_check(agent) == []


def test_the_check_names_the_span_where_the_floor_records_less(
    agent: Any, bench: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a floor that dropped the finish reason of every response would record less than otel-replay
    monkeypatch.setattr(bench[1], "_dumps", _without_finish_reason(bench[1]._dumps))
    differences = bench[0].floor_check(agent)
    assert [d.split(":")[0] for d in differences] == ["span 0 (chat gpt-4o-mini)", "span 2 (chat gpt-4o-mini)"]


def test_the_check_refuses_stand_in_hashes(
    agent: Any, bench: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a floor that skipped hashing (a constant where otel-replay writes a digest) would cost less than recording
    monkeypatch.setattr(bench[1], "_hash", lambda text: "sha256:")
    assert bench[0].floor_check(agent) != []


def test_the_floor_exports_its_spans_to_its_spool(agent: Any, bench: tuple[ModuleType, ModuleType], home: Path) -> None:
    from opentelemetry import trace

    provider: Any = trace.get_tracer_provider()  # otel-replay's SDK provider, which the floor takes its resource from
    floor = bench[1].FloorRecorder(spool=home / "floor-spool", resource=provider.resource)
    floor.install()
    try:
        agent.invoke(bench[0].QUESTION)
    finally:
        floor.uninstall()
    floor.flush()
    (segment,) = sealed_segments(home / "floor-spool")
    text = b"".join(read_segment(segment).payloads)
    for name in (b"invoke_agent LangGraph", b"chat gpt-4o-mini", b"execute_tool get_weather", b"It is always sunny"):
        assert name in text


def _without_finish_reason(dumps: Any) -> Any:
    def dump(value: Any) -> str:
        if isinstance(value, dict) and "finish_reason" in value:
            value = {k: v for k, v in value.items() if k != "finish_reason"}
        return str(dumps(value))

    return dump
