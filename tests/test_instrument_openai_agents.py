"""OpenAI Agents SDK instrumentation end to end: real agents on the real SDK and ``openai`` client, against the
fake OpenAI server, recorded into a real store, shown and replayed.

The fake server calls the first tool offered (its arguments set per tool), then answers with a text quoting the
tool's result. The tools count their real executions in ``CALLS`` and ``post_note`` appends to a file, so a test
can show that a mock or deterministic replay ran none of them. The agents and the replay entrypoints live in this
module (importable as ``test_instrument_openai_agents:NAME``) because a replay imports the entrypoint again.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool, handoff
from agents.models.openai_responses import OpenAIResponsesModel
from agents.tracing import TracingProcessor, get_trace_provider
from fake_llm_servers import FakeLLMServer
from openai import AsyncOpenAI
from pydantic import BaseModel

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.openai import OpenAIInstrumentor
from otel_replay.instrumentation.openai_agents import (
    SPAN_EVENT,
    SPAN_TYPE,
    TRACE_ID_ATTR,
    OpenAIAgentsInstrumentor,
    OtelReplayTracingProcessor,
    declare_risk,
)
from otel_replay.recording import begin_tool_call, in_run
from otel_replay.storage.store import Store

NOTES_ENV = "OA_TEST_NOTES"
CALLS: Counter[str] = Counter()
"""Real executions: ``post_note``, ``get_forecast``, ``on_handoff``."""
SERVER: dict[str, FakeLLMServer] = {}
INSTRUCTIONS: dict[str, str] = {"text": "You keep notes."}


class Forecast(BaseModel):
    city: str
    conditions: str


@function_tool
def post_note(city: str) -> str:
    """Post a note about a city (appends it to the notes file)."""
    CALLS["post_note"] += 1
    with Path(os.environ[NOTES_ENV]).open("a", encoding="utf-8") as notes:
        notes.write(f"note for {city}\n")
    return f"noted {city}"


@function_tool
def get_forecast(city: str) -> Forecast:
    """The forecast for a city."""
    CALLS["get_forecast"] += 1
    return Forecast(city=city, conditions="sunny")


@function_tool
@orp.tool(risk="write")
def archive_note(city: str) -> str:
    """Archive a note (an @otel_replay.tool under the SDK's decorator)."""
    CALLS["archive_note"] += 1
    return f"archived {city}"


def _model() -> OpenAIResponsesModel:
    client = AsyncOpenAI(base_url=SERVER["fake"].openai_url, api_key="sk-test-" + "2" * 32)
    return OpenAIResponsesModel(model="gpt-fake", openai_client=client)


class CachingResponsesModel(OpenAIResponsesModel):
    """The SDK's Responses model as it behaves against api.openai.com: the runner adds a prompt cache key made up
    for each run (``agents-sdk:run:<uuid4>``) to every request."""

    def _supports_default_prompt_cache_key(self) -> bool:
        return True


def caching_agent() -> Agent:
    client = AsyncOpenAI(base_url=SERVER["fake"].openai_url, api_key="sk-test-" + "2" * 32)
    return Agent(
        name="cached",
        instructions="You keep notes.",
        tools=[post_note],
        model=CachingResponsesModel(model="gpt-fake", openai_client=client),
    )


def notes_agent() -> Agent:
    return Agent(name="notes", instructions=INSTRUCTIONS["text"], tools=[post_note, get_forecast], model=_model())


def forecast_agent() -> Agent:
    return Agent(name="forecaster", instructions="You forecast.", tools=[get_forecast], model=_model())


def archive_agent() -> Agent:
    return Agent(name="archivist", instructions="You archive.", tools=[archive_note], model=_model())


def _on_handoff(ctx: Any) -> None:
    CALLS["on_handoff"] += 1


def triage_agent() -> Agent:
    billing = Agent(name="billing", instructions="You handle billing.", model=_model())
    return Agent(
        name="triage", instructions="You route.", handoffs=[handoff(billing, on_handoff=_on_handoff)], model=_model()
    )


AGENTS = {
    "notes": notes_agent,
    "cached": caching_agent,
    "forecaster": forecast_agent,
    "archivist": archive_agent,
    "triage": triage_agent,
}


async def ask(input: str, agent: str = "notes") -> Any:  # noqa: A002 - the implicit run records Runner.run's input
    """``--app`` entrypoint: the run the instrumentor began implicitly at ``Runner.run``."""
    return (await Runner.run(AGENTS[agent](), input=input)).final_output


async def ask_forecaster(input: str) -> Any:  # noqa: A002
    return await ask(input, "forecaster")


async def ask_triage(input: str) -> Any:  # noqa: A002
    return await ask(input, "triage")


async def ask_cached(input: str) -> Any:  # noqa: A002
    return await ask(input, "cached")


class CountingProcessor(TracingProcessor):
    """An application's own SDK trace processor: counts what it is given."""

    def __init__(self) -> None:
        self.seen = 0

    def on_trace_start(self, trace: Any) -> None:
        self.seen += 1

    def on_trace_end(self, trace: Any) -> None:
        self.seen += 1

    def on_span_start(self, span: Any) -> None:
        self.seen += 1

    def on_span_end(self, span: Any) -> None:
        self.seen += 1

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def oa(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The fake server, both instrumentors (the SDK's tracing bridged, next to a counting processor of the
    application's and nothing else: no export to OpenAI), the notes file and the counters reset."""
    notes = tmp_path / "notes.txt"
    monkeypatch.setenv(NOTES_ENV, str(notes))
    monkeypatch.setenv("OPENAI_AGENTS_DONT_LOG_MODEL_DATA", "1")
    CALLS.clear()
    INSTRUCTIONS["text"] = "You keep notes."
    provider = get_trace_provider()
    before = list(provider._multi_processor._processors)
    counting = CountingProcessor()
    provider.set_processors([counting])
    openai_instrumentor = OpenAIInstrumentor()
    instrumentor = OpenAIAgentsInstrumentor()
    with FakeLLMServer(
        tool_args_for={
            "post_note": {"city": "Oslo"},
            "get_forecast": {"city": "Rome"},
            "archive_note": {"city": "Bern"},
        }
    ) as server:
        SERVER["fake"] = server
        openai_instrumentor.instrument()
        instrumentor.instrument(tracing="bridge")
        try:
            yield {"notes": notes, "server": server, "instrumentor": instrumentor, "counting": counting}
        finally:
            instrumentor.uninstrument()
            openai_instrumentor.uninstrument()
            provider.set_processors(before)
            INSTRUCTIONS["text"] = "You keep notes."


def notes_written(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def record(coro: Any, agent: str) -> tuple[Any, orp.Run]:
    result = asyncio.run(coro)
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return result, store.load_run(summary.trace_id)


STEPS = [("model", "openai.responses"), ("tool", "post_note"), ("model", "openai.responses")]


# ---------------------------------------------------------------------------------------------- tests


def test_runner_run_is_one_run_with_every_model_and_tool_call_a_step(oa: dict[str, Any]) -> None:
    answer, run = record(ask("note Oslo"), "notes")
    assert answer == "The weather: noted Oslo"
    assert [(s.kind, s.name) for s in run.steps] == STEPS
    tool = run.steps[1]
    assert tool.attributes[semconv.TOOL_RISK] == "high"  # undeclared: post_… is a high-risk name
    assert tool.attributes[semconv.TOOL_FUNCTION] == "test_instrument_openai_agents:post_note"
    assert tool.attributes[semconv.STEP_INSTRUMENTATION] == "openai_agents"
    assert tool.snapshots["tool"]["arguments"] == {"city": "Oslo"}
    assert tool.snapshots["tool"]["result"] == "noted Oslo"
    assert run.snapshots["input"]["kwargs"] == {"input": "note Oslo"}
    assert run.snapshots["output"]["answer"] == "The weather: noted Oslo"
    assert not run.entrypoint
    assert CALLS == {"post_note": 1} and notes_written(oa["notes"]) == ["note for Oslo"]


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_replay_answers_the_tool_and_the_model_from_the_recording(oa: dict[str, Any], mode: str) -> None:
    _, run = record(ask("note Oslo"), "notes")
    requests = oa["server"].count
    CALLS.clear()
    result = orp.replay(run.trace_id, mode=mode, entrypoint="test_instrument_openai_agents:ask")
    assert result.outcome == "matched", result.divergences
    assert oa["server"].count == requests
    assert CALLS == {} and notes_written(oa["notes"]) == ["note for Oslo"]


def test_changed_instructions_diverge_at_the_first_model_step(oa: dict[str, Any]) -> None:
    _, run = record(ask("note Oslo"), "notes")
    INSTRUCTIONS["text"] = "You keep short notes."
    result = orp.replay(run.trace_id, mode="deterministic", entrypoint="test_instrument_openai_agents:ask")
    first = result.first_divergence
    assert result.outcome == "diverged" and first is not None
    assert (first.step_index, first.kind) == (0, "request")
    assert '+  "instructions": "You keep short notes."' in (first.diff or "")
    assert CALLS == {"post_note": 1}


def test_live_replay_needs_an_approval_for_the_high_risk_function_tool(oa: dict[str, Any]) -> None:
    _, run = record(ask("note Oslo"), "notes")
    refused = orp.replay(run.trace_id, mode="live", reason="verify", entrypoint="test_instrument_openai_agents:ask")
    assert refused.outcome == "refused" and "--approve post_note" in (refused.refusal or "")
    assert CALLS == {"post_note": 1}
    approved = orp.replay(
        run.trace_id,
        mode="live",
        reason="verify",
        approvals=["post_note"],
        entrypoint="test_instrument_openai_agents:ask",
    )
    assert approved.executions == {"post_note": 1}
    assert notes_written(oa["notes"]) == ["note for Oslo", "note for Oslo"]


def test_the_sdk_prompt_cache_key_made_up_per_run_is_not_a_divergence(oa: dict[str, Any]) -> None:
    _, run = record(ask_cached("note Oslo"), "cached")
    keys = {s.snapshots["model"]["request"].get("prompt_cache_key") for s in run.steps if s.kind == "model"}
    assert len(keys) == 1 and next(iter(keys)).startswith("agents-sdk:run:")
    result = orp.replay(run.trace_id, mode="deterministic", entrypoint="test_instrument_openai_agents:ask_cached")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {"post_note": 1}


def test_run_sync_and_run_streamed_are_one_run_each(oa: dict[str, Any]) -> None:
    result = Runner.run_sync(notes_agent(), "note Oslo")
    assert result.final_output == "The weather: noted Oslo"

    async def streamed() -> Any:
        run = Runner.run_streamed(notes_agent(), input="note Oslo")
        assert not in_run(), "the streamed run lives in its own context, not the caller's"
        async for _ in run.stream_events():
            pass
        return run.final_output

    assert asyncio.run(streamed()) == "The weather: noted Oslo"
    orp.flush()
    with Store.open() as store:
        runs = [store.load_run(s.trace_id) for s in store.runs(agent="notes", kind="original")]
    assert len(runs) == 2
    for run in runs:
        assert [(s.kind, s.name) for s in run.steps] == STEPS
        assert run.snapshots["output"]["answer"] == "The weather: noted Oslo"


def test_a_run_inside_an_agent_is_part_of_that_run(oa: dict[str, Any]) -> None:
    @orp.agent("outer")
    async def outer() -> Any:
        first = await Runner.run(notes_agent(), "note Oslo")
        second = await Runner.run(notes_agent(), "note Oslo")
        return [first.final_output, second.final_output]

    asyncio.run(outer())
    orp.flush()
    with Store.open() as store:
        assert store.runs(agent="notes") == []
        (summary,) = store.runs(agent="outer")
        run = store.load_run(summary.trace_id)
    assert [(s.kind, s.name) for s in run.steps] == STEPS + STEPS


def test_a_tool_returning_an_object_replays_the_text_the_model_was_sent(oa: dict[str, Any]) -> None:
    answer, run = record(ask_forecaster("forecast Rome"), "forecaster")
    assert answer == "The weather: city='Rome' conditions='sunny'"
    assert run.steps[1].snapshots["tool"]["result"] == "city='Rome' conditions='sunny'"
    CALLS.clear()
    result = orp.replay(run.trace_id, mode="deterministic", entrypoint="test_instrument_openai_agents:ask_forecaster")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}


def test_tool_risk_from_the_map_the_tool_and_a_stacked_otel_replay_tool(oa: dict[str, Any]) -> None:
    instrumentor: OpenAIAgentsInstrumentor = oa["instrumentor"]
    assert instrumentor.risk_of(post_note) is None  # undeclared: the recorder's name heuristic decides
    assert instrumentor.risk_of(archive_note) == "write"
    declare_risk(get_forecast, "write")
    try:
        assert instrumentor.risk_of(get_forecast) == "write"
        instrumentor.uninstrument()
        instrumentor.instrument(tool_risks={"get_forecast": "high"}, tracing="bridge")
        assert instrumentor.risk_of(get_forecast) == "high"
    finally:
        object.__delattr__(get_forecast, "otel_replay_risk")
        instrumentor.uninstrument()
        instrumentor.instrument(tool_risks={}, tracing="bridge")
    _, run = record(ask("archive Bern", "archivist"), "archivist")
    assert [(s.kind, s.name, s.attributes.get(semconv.TOOL_RISK)) for s in run.steps] == [
        ("model", "openai.responses", None),
        ("tool", "archive_note", "write"),
        ("model", "openai.responses", None),
    ]
    with pytest.raises(ValueError, match="risk must be one of"):
        OpenAIAgentsInstrumentor(tool_risks={"x": "dangerous"})
    with pytest.raises(ValueError, match="tracing must be one of"):
        OpenAIAgentsInstrumentor(tracing="upload")


def test_a_handoff_is_a_handoff_step_replayed_without_its_callback(oa: dict[str, Any]) -> None:
    answer, run = record(ask_triage("I was billed twice"), "triage")
    assert answer.startswith("The weather: ")
    assert [(s.kind, s.name) for s in run.steps] == [
        ("model", "openai.responses"),
        ("handoff", "transfer_to_billing"),
        ("model", "openai.responses"),
    ]
    handoff_step = run.steps[1]
    assert semconv.TOOL_RISK not in handoff_step.attributes  # routing: not the name heuristic's "transfer"
    assert handoff_step.attributes[semconv.HANDOFF_TO] == "billing"
    assert handoff_step.snapshots["tool"]["result"] == {"agent": "billing"}
    assert CALLS == {"on_handoff": 1}
    CALLS.clear()
    result = orp.replay(run.trace_id, mode="deterministic", entrypoint="test_instrument_openai_agents:ask_triage")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}
    live = orp.replay(
        run.trace_id, mode="live", reason="handoff", entrypoint="test_instrument_openai_agents:ask_triage"
    )
    assert live.outcome == "matched", (live.refusal, live.divergences)  # routing needs no approval
    assert CALLS == {"on_handoff": 1}


def test_a_handoff_recorded_as_a_tool_step_by_convention_1_replays(
    oa: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Convention 1.x recorded a handoff as a ``tool`` step with risk ``read``: today's handoff steps are answered
    from it, in every offline mode and live without an approval."""
    import otel_replay.instrumentation._agents_steps as steps

    def as_in_1x(name: str, arguments: Any, **options: Any) -> Any:
        if options.pop("handoff_to", None) is not None:
            options["risk"] = "read"
        return begin_tool_call(name, arguments, **options)

    monkeypatch.setattr(steps, "begin_tool_call", as_in_1x)
    _, run = record(ask_triage("I was billed twice"), "triage")
    monkeypatch.undo()
    assert [(s.kind, s.attributes.get(semconv.TOOL_RISK)) for s in run.steps][1] == ("tool", "read")
    for mode in ("mock", "deterministic", "live"):
        result = orp.replay(
            run.trace_id, mode=mode, reason="1.x", entrypoint="test_instrument_openai_agents:ask_triage"
        )
        assert result.outcome == "matched", (mode, result.refusal, result.divergences)


def test_the_sdk_tracing_is_bridged_into_the_run_and_silent_during_replays(oa: dict[str, Any]) -> None:
    counting: CountingProcessor = oa["counting"]
    _, run = record(ask("note Oslo"), "notes")
    assert counting.seen > 0, "bridging keeps the application's own SDK trace processors"
    root = next(s for s in run.spans if not s.parent_span_id)
    assert root.span_attributes[TRACE_ID_ATTR].startswith("trace_")
    bridged = [e.attributes[SPAN_TYPE] for s in run.spans for e in s.events if e.name == SPAN_EVENT]
    assert "agent" in bridged
    seen = counting.seen
    result = orp.replay(run.trace_id, mode="mock", entrypoint="test_instrument_openai_agents:ask")
    assert result.outcome == "matched", result.divergences
    assert counting.seen == seen, "a replay's SDK trace reached the application's processors"


def test_replace_sets_the_sdk_processors_aside_and_gives_them_back(oa: dict[str, Any]) -> None:
    instrumentor: OpenAIAgentsInstrumentor = oa["instrumentor"]
    provider = get_trace_provider()
    instrumentor.uninstrument()
    assert [type(p) for p in provider._multi_processor._processors] == [CountingProcessor]
    instrumentor.instrument(tracing="replace")
    assert [type(p) for p in provider._multi_processor._processors] == [OtelReplayTracingProcessor]
    instrumentor.uninstrument()
    assert [type(p) for p in provider._multi_processor._processors] == [CountingProcessor]
    instrumentor.instrument(tracing="bridge")


def test_replay_tool_replays_a_function_tool(oa: dict[str, Any]) -> None:
    _, run = record(ask("note Oslo"), "notes")
    CALLS.clear()
    mock = orp.replay_tool(run.trace_id, 1)
    assert (mock.tool, mock.outcome) == ("post_note", "matched")
    assert CALLS == {}
    refused = orp.replay_tool(run.trace_id, 1, mode="live", reason="retry")
    assert refused.outcome == "refused" and CALLS == {}
    live = orp.replay_tool(run.trace_id, 1, mode="live", reason="retry", approve=True, args={"city": "Lima"})
    assert (live.outcome, live.result) == ("diverged", "noted Lima")
    assert notes_written(oa["notes"]) == ["note for Oslo", "note for Lima"]


def test_suppressed_instrumentation_records_nothing(oa: dict[str, Any]) -> None:
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        asyncio.run(ask("note Oslo"))
    orp.flush()
    with Store.open() as store:
        assert store.runs(agent="notes") == []
    assert CALLS == {"post_note": 1}


def test_replay_tool_never_imports_a_tool_module_the_recording_names_outside_the_project(oa: dict[str, Any]) -> None:
    import sys

    from otel_replay.recording import begin_tool_call, end_call
    from otel_replay.replay.engine import ReplayRefused

    hostile = "agents.extensions.handoff_filters"
    assert hostile not in sys.modules

    @orp.agent("forged")
    def forged() -> None:
        call = begin_tool_call(
            "post_note", {"city": "Oslo"}, function=f"{hostile}:remove_all_tools", instrumentation="openai_agents"
        )
        end_call(call, result="noted Oslo")

    forged()
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="forged")
    with pytest.raises(ReplayRefused, match="installed package"):
        orp.replay_tool(summary.trace_id, 0, mode="live", reason="retry", approve=True)
    assert hostile not in sys.modules, "a module named by the recording was imported"
    assert CALLS == {}


def test_a_module_named_agents_without_the_sdk_distribution_is_not_taken_for_the_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import otel_replay.instrumentation as instrumentation

    assert instrumentation.sdk_installed("openai_agents")  # the SDK's module is found, its distribution too
    monkeypatch.setitem(instrumentation.EXTRAS, "openai_agents", "otel-replay-no-such-distribution")
    assert not instrumentation.sdk_installed("openai_agents")  # a project's own `agents` package: not the SDK
