"""``tracer_provider=``: an instrumentor given a provider records into that provider, like any OpenTelemetry
contrib instrumentor, and nowhere else.

Two SDK providers, each with its own in-memory exporter, sit beside the default runtime (the spool of the
``home`` fixture). The real ``openai`` SDK calls a local fake of its HTTP API; LangChain runs a real tool and a
real (fake-list) chat model. Whatever an instrumentor given provider A records must reach A's exporter and
neither B's nor the default store; ``uninstrument()`` ends that, and instrumenting again without the option
records into the default store again. A replay is read from the replay's own runtime, so during a replay the
provider is not used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_llm_servers import FakeLLMServer
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay as orp
from otel_replay import instrumentation, semconv
from otel_replay.instrumentation.openai import OpenAIInstrumentor
from otel_replay.storage.store import Store

BASE_URL = ""
"""The fake server's URL; read at call time (a replay re-imports this module's agent)."""


class Sink:
    """An SDK TracerProvider of its own with an in-memory exporter."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def roots(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if semconv.RUN_ID in (s.attributes or {})]

    def steps(self) -> list[tuple[str, str]]:
        return [
            (str(s.attributes[semconv.STEP_KIND]), str(s.attributes[semconv.STEP_NAME]))
            for s in self.spans()
            if s.attributes and semconv.STEP_KIND in s.attributes
        ]


def _ask(question: str) -> str:
    client = openai.OpenAI(base_url=BASE_URL, api_key="sk-test-not-a-key", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content or ""


@orp.agent("provider-agent")
def provider_agent(question: str) -> str:
    """A run recorded through the default runtime that makes one OpenAI call."""
    return _ask(question)


def _default_runs(home: Path) -> list[Any]:
    orp.flush()
    with Store.open() as store:
        return list(store.runs())


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    global BASE_URL
    with FakeLLMServer() as fake:
        BASE_URL = fake.openai_url
        yield fake


@pytest.fixture
def sinks() -> tuple[Sink, Sink]:
    return Sink(), Sink()


@pytest.fixture
def openai_off() -> Iterator[OpenAIInstrumentor]:
    """The OpenAI instrumentor, off before the test and after it (it is a process-wide singleton)."""
    instrumentor = OpenAIInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    yield instrumentor
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def test_an_openai_call_outside_any_run_goes_to_the_given_provider_only(
    home: Path, server: FakeLLMServer, sinks: tuple[Sink, Sink], openai_off: OpenAIInstrumentor
) -> None:
    a, b = sinks
    openai_off.instrument(tracer_provider=a.provider)
    assert _ask("hello") == "echo: hello"

    (root,) = a.roots()
    assert a.steps() == [("model", "openai.chat.completions")]
    assert {s.context.trace_id for s in a.spans()} == {root.context.trace_id}  # one run, one trace
    assert b.spans() == []
    assert _default_runs(home) == []

    # uninstrument ends it; instrumenting again without the option records into the default runtime
    openai_off.uninstrument()
    assert _ask("again") == "echo: again"
    openai_off.instrument()
    assert _ask("default") == "echo: default"
    assert len(a.spans()) == 2 and b.spans() == []
    (summary,) = _default_runs(home)
    assert summary.agent == "openai.chat.completions"
    assert server.count == 3


def test_inside_a_run_of_the_default_runtime_the_step_goes_to_the_given_provider(
    home: Path, server: FakeLLMServer, sinks: tuple[Sink, Sink], openai_off: OpenAIInstrumentor
) -> None:
    a, b = sinks
    openai_off.instrument(tracer_provider=a.provider)
    assert provider_agent("inside") == "echo: inside"

    (summary,) = _default_runs(home)  # the run's root is the default runtime's
    assert a.roots() == [] and b.spans() == []
    (step,) = a.spans()  # the instrumentor's step is the provider's, a child of that root
    assert step.attributes is not None and step.attributes[semconv.STEP_NAME] == "openai.chat.completions"
    assert f"{step.context.trace_id:032x}" == summary.trace_id
    assert step.parent is not None
    with Store.open() as store:
        run = store.load_run(summary.trace_id)
    root_span_id = next(s.span_id for s in run.spans if not s.parent_span_id)
    assert f"{step.parent.span_id:016x}" == root_span_id
    assert run.steps == ()  # and the default store holds the run without it


def test_a_replay_records_into_its_own_runtime_whatever_the_provider(
    home: Path, server: FakeLLMServer, sinks: tuple[Sink, Sink], openai_off: OpenAIInstrumentor
) -> None:
    a, _ = sinks
    openai_off.instrument()
    assert provider_agent("recorded") == "echo: recorded"
    (summary,) = _default_runs(home)
    openai_off.uninstrument()
    openai_off.instrument(tracer_provider=a.provider)

    result = orp.replay(summary.trace_id, mode="mock")

    assert result.outcome == "matched", result.divergences
    assert result.replay is not None and [s.kind for s in result.replay.steps] == ["model"]
    assert a.spans() == []  # the replay's steps are where the replay reads them, not in the app's provider
    assert server.count == 1


def test_orp_instrument_forwards_the_provider_and_refuses_anything_else(
    home: Path, server: FakeLLMServer, sinks: tuple[Sink, Sink], openai_off: OpenAIInstrumentor
) -> None:
    a, b = sinks
    with pytest.raises(ValueError, match="tracer_provider must be an OpenTelemetry TracerProvider"):
        orp.instrument("openai", tracer_provider="not a provider")
    assert instrumentation.instrumented("openai") == []

    assert orp.instrument("openai", tracer_provider=b.provider) == ["openai"]
    assert _ask("via orp") == "echo: via orp"
    assert a.spans() == [] and len(b.roots()) == 1
    assert orp.uninstrument("openai") == ["openai"]
    assert _default_runs(home) == []


# ----------------------------------------------------------------------------------------------- LangChain


@pytest.fixture
def langchain_off() -> Iterator[Any]:
    from otel_replay.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    yield instrumentor
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def test_langchain_tools_and_models_go_to_the_given_provider_only(
    home: Path, sinks: tuple[Sink, Sink], langchain_off: Any
) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.tools import tool

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order by id."""
        return f"order {order_id}: shipped"

    model = FakeListChatModel(responses=["it shipped"])
    a, b = sinks
    langchain_off.instrument(tracer_provider=a.provider)

    assert lookup_order.invoke({"order_id": "7"}) == "order 7: shipped"
    assert model.invoke("where is order 7?").content == "it shipped"

    assert len(a.roots()) == 2  # one implicit run per call made outside any run
    assert [kind for kind, _ in a.steps()] == ["tool", "model"]
    assert b.spans() == []
    assert _default_runs(home) == []

    langchain_off.uninstrument()
    assert lookup_order.invoke({"order_id": "8"}) == "order 8: shipped"
    langchain_off.instrument()
    assert lookup_order.invoke({"order_id": "9"}) == "order 9: shipped"
    assert len(a.roots()) == 2 and b.spans() == []
    (summary,) = _default_runs(home)
    assert summary.agent == "lookup_order"


# ------------------------------------------------------------------------------------- OpenAI Agents SDK


# the Agents SDK test module's setup: fake server, both instrumentors, counters
import test_instrument_openai_agents as oa_tests  # noqa: E402
from test_instrument_openai_agents import oa  # noqa: E402, F401 - the fixture, used below by name


def test_an_agents_sdk_run_and_the_model_calls_in_it_go_to_the_given_provider(
    home: Path, sinks: tuple[Sink, Sink], request: pytest.FixtureRequest
) -> None:
    setup = request.getfixturevalue("oa")
    a, b = sinks
    instrumentor = setup["instrumentor"]
    instrumentor.uninstrument()
    instrumentor.instrument(tracing="bridge", tracer_provider=a.provider)

    assert asyncio.run(oa_tests.ask("note Oslo")) == "The weather: noted Oslo"

    (root,) = a.roots()
    assert root.attributes is not None and root.attributes[semconv.GEN_AI_AGENT_NAME] == "notes"
    # the OpenAI instrumentor has no provider of its own: its model steps join the run where it is recorded
    assert a.steps() == oa_tests.STEPS
    assert {s.context.trace_id for s in a.spans()} == {root.context.trace_id}
    assert b.spans() == []
    assert _default_runs(home) == []
