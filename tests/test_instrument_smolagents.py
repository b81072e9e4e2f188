"""smolagents instrumentation in process: real ``CodeAgent`` runs on the real SDK and ``openai`` client, against the
fake OpenAI server (which answers with scripted code blobs), recorded into a real store and replayed; and the
reading of tool calls in model-written code that ``dry`` and the replay session use.

The agents and the replay entrypoints live in this module (importable as ``test_instrument_smolagents:NAME``)
because a replay imports the entrypoint again. ``CALLS`` counts the tools' real executions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_llm_servers import FakeLLMServer
from smolagents import CodeAgent, OpenAIServerModel, Tool, ToolCallingAgent, tool

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation import instrumented, uninstrument
from otel_replay.instrumentation.smolagents import SmolagentsInstrumentor, declare_risk
from otel_replay.recording import in_run
from otel_replay.replay.matching.toolcalls import code_calls, code_tools, not_firewalled
from otel_replay.storage.store import Store

CALLS: Counter[str] = Counter()
SERVER: dict[str, FakeLLMServer] = {}
ONE_STEP = '<code>\nw = get_weather(city="Oslo")\nsave_note(text=w)\nfinal_answer(w)\n</code>'
TWO_STEPS = ['Thought: look.\n<code>\nprint(get_weather(city="Oslo"))\n', '<code>\nfinal_answer("done")\n</code>']
RAW_STEPS = ['<code>\nprint(raw_lookup(word="Oslo"))\n</code>', '<code>\nfinal_answer("done")\n</code>']


@tool
def save_note(text: str) -> str:
    """Saves a note.

    Args:
        text: The note.
    """
    CALLS["save_note"] += 1
    return "saved"


class WeatherTool(Tool):
    name = "get_weather"
    description = "The weather in a city."
    inputs = {"city": {"type": "string", "description": "The city."}}  # noqa: RUF012 - smolagents' own style
    output_type = "string"

    def forward(self, city: str) -> str:
        CALLS["get_weather"] += 1
        return f"sunny in {city}"


class RawLookupTool(Tool):
    """A tool that overrides ``__call__``, as smolagents' ``PipelineTool`` does: the instrumentor does not see it."""

    name = "raw_lookup"
    description = "Looks a word up."
    inputs = {"word": {"type": "string", "description": "The word."}}  # noqa: RUF012
    output_type = "string"

    def forward(self, word: str) -> str:
        return f"{word}: found"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        CALLS["raw_lookup"] += 1
        return self.forward(*args, **kwargs)


def _agent() -> CodeAgent:
    model = OpenAIServerModel(model_id="gpt-fake", api_base=SERVER["fake"].openai_url, api_key="sk-test-" + "3" * 32)
    tools = [save_note, WeatherTool(), RawLookupTool()]
    return CodeAgent(tools=tools, model=model, max_steps=3, verbosity_level=0)


def ask(task: str) -> Any:
    """``--app`` entrypoint: the run the instrumentor begins at ``agent.run``."""
    return _agent().run(task)


def ask_tool_calling(task: str) -> Any:
    """A ``ToolCallingAgent``: the fake server asks for ``get_weather`` until the last step, then it answers."""
    model = OpenAIServerModel(model_id="gpt-fake", api_base=SERVER["fake"].openai_url, api_key="sk-test-" + "3" * 32)
    return ToolCallingAgent(tools=[WeatherTool()], model=model, max_steps=2, verbosity_level=0).run(task)


MANAGER_CODE = (
    'Thought: ask the researcher, then note it.\n<code>\nw = researcher(task="weather in Oslo")\n'
    'save_note(text="Oslo")\nfinal_answer("noted")\n</code>'
)


def ask_manager(task: str) -> Any:
    """smolagents' multi-agent shape: a manager ``CodeAgent`` whose code calls a managed ``ToolCallingAgent``."""
    model = OpenAIServerModel(model_id="gpt-fake", api_base=SERVER["fake"].openai_url, api_key="sk-test-" + "3" * 32)
    researcher = ToolCallingAgent(
        tools=[WeatherTool()], model=model, max_steps=2, verbosity_level=0, name="researcher",
        description="Looks the weather up.",
    )  # fmt: skip
    manager = CodeAgent(tools=[save_note], model=model, managed_agents=[researcher], max_steps=3, verbosity_level=0)
    return manager.run(task)


def ask_streamed(task: str) -> Any:
    steps = list(_agent().run(task, stream=True))
    return steps[-1].output


@orp.agent("plain-code-agent")
def ask_plain(task: str) -> Any:
    """A run recorded with only the model SDK instrumented: the tools are not steps."""
    return _agent().run(task)


@pytest.fixture
def smol(home: Path) -> Iterator[FakeLLMServer]:
    CALLS.clear()
    with FakeLLMServer() as server:
        server.chat_texts["note Oslo"] = [ONE_STEP]
        server.chat_texts["look Oslo"] = TWO_STEPS
        server.chat_texts["raw Oslo"] = RAW_STEPS
        server.chat_texts["Plan Oslo"] = [MANAGER_CODE]
        SERVER["fake"] = server
        yield server
    uninstrument("smolagents", "openai")


def _last_run(agent: str) -> orp.Run:
    orp.flush()
    with Store.open() as store:
        summary = store.runs(agent=agent, kind="original")[0]
        return store.load_run(summary.trace_id)


def test_agent_run_is_one_run_with_every_tool_call_a_step(smol: FakeLLMServer) -> None:
    assert orp.instrument("smolagents") == ["smolagents"]
    assert set(instrumented("openai", "smolagents")) == {"openai", "smolagents"}  # the model calls too
    assert ask("note Oslo") == "sunny in Oslo"
    run = _last_run("CodeAgent")
    steps = [(s.kind, s.name) for s in run.steps]
    assert steps == [
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("tool", "save_note"),
        ("tool", "final_answer"),
    ]
    weather = run.steps[1]
    assert weather.attributes[semconv.STEP_INSTRUMENTATION] == "smolagents"
    assert weather.attributes[semconv.TOOL_FUNCTION] == "test_instrument_smolagents:WeatherTool"
    assert run.steps[2].attributes[semconv.TOOL_FUNCTION] == "test_instrument_smolagents:save_note"  # a @tool
    assert weather.snapshots["tool"]["arguments"] == {"city": "Oslo"}
    assert weather.snapshots["tool"]["result"] == "sunny in Oslo"
    assert run.snapshots["input"]["kwargs"] == {"task": "note Oslo"}
    assert code_tools(run) == {"get_weather", "save_note", "raw_lookup"}
    assert not_firewalled(run) == []
    assert CALLS == {"get_weather": 1, "save_note": 1}

    requests = smol.count
    for mode in ("mock", "deterministic"):
        result = orp.replay(run.trace_id, mode=mode, entrypoint="test_instrument_smolagents:ask")
        assert result.outcome == "matched", result.divergences
    assert smol.count == requests and CALLS == {"get_weather": 1, "save_note": 1}
    dry = orp.replay(run.trace_id, mode="dry")
    assert dry.readiness is not None and dry.readiness["executes_code"] is True


def test_tool_calling_agent_tools_are_steps_answered_in_a_replay(smol: FakeLLMServer) -> None:
    orp.instrument("smolagents")
    ask_tool_calling("weather Oslo")
    run = _last_run("ToolCallingAgent")
    assert [(s.kind, s.name) for s in run.steps] == [
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("model", "openai.chat.completions"),
        ("tool", "get_weather"),
        ("model", "openai.chat.completions"),
    ]
    assert code_tools(run) is None and not_firewalled(run) == []
    requests = smol.count
    result = orp.replay(run.trace_id, mode="mock", entrypoint="test_instrument_smolagents:ask_tool_calling")
    assert result.outcome == "matched", result.divergences
    assert smol.count == requests and CALLS == {"get_weather": 2}


def test_tool_risks_and_declared_risk(smol: FakeLLMServer) -> None:
    orp.instrument("smolagents", tool_risks={"save_note": "write"})
    weather = WeatherTool()
    declare_risk(weather, "high")
    model = OpenAIServerModel(model_id="gpt-fake", api_base=smol.openai_url, api_key="sk-test-" + "3" * 32)
    CodeAgent(tools=[save_note, weather], model=model, verbosity_level=0).run("note Oslo")
    run = _last_run("CodeAgent")
    risks = {s.name: s.attributes[semconv.TOOL_RISK] for s in run.steps if s.kind == "tool"}
    assert risks == {"get_weather": "high", "save_note": "write", "final_answer": "read"}
    with pytest.raises(ValueError):
        declare_risk(weather, "risky")


def test_a_managed_agent_is_steps_of_its_managers_run(smol: FakeLLMServer) -> None:
    """The manager's code calls the managed agent: one run (the manager's), the managed agent's model calls and
    tools its steps; a mock replay answers all of them and runs no tool."""
    orp.instrument("smolagents")
    assert ask_manager("Plan Oslo") == "noted"
    orp.flush()
    with Store.open() as store:
        assert [r.agent for r in store.runs(kind="original")] == ["CodeAgent"]
    run = _last_run("CodeAgent")
    steps = [(s.kind, s.name) for s in sorted(run.steps, key=lambda s: s.index)]
    assert steps[0] == ("model", "openai.chat.completions")  # the manager's code
    assert ("tool", "get_weather") in steps and steps[-2:] == [("tool", "save_note"), ("tool", "final_answer")]
    ran = Counter(CALLS)
    result = orp.replay(run.trace_id, mode="mock", entrypoint=f"{__name__}:ask_manager")
    assert result.outcome == "matched", result.divergences
    assert ran == CALLS, "a mock replay ran a tool"


def test_streamed_run_is_one_run_that_ends_with_the_generator(smol: FakeLLMServer) -> None:
    orp.instrument("smolagents")
    assert ask_streamed("note Oslo") == "sunny in Oslo"
    run = _last_run("CodeAgent")
    assert [s.kind for s in run.steps] == ["model", "tool", "tool", "tool"]
    assert run.snapshots["output"]["answer"] == "sunny in Oslo"


def test_a_stream_closed_early_ends_its_run(smol: FakeLLMServer) -> None:
    orp.instrument("smolagents")
    steps = _agent().run("note Oslo", True)
    next(steps)  # the first step only
    steps.close()
    assert not in_run()
    run = _last_run("CodeAgent")
    assert run.summary.status == "ok"


def test_a_tool_called_outside_a_run_is_not_recorded(smol: FakeLLMServer) -> None:
    orp.instrument("smolagents")
    assert WeatherTool()(city="Rome") == "sunny in Rome"
    assert CALLS == {"get_weather": 1}


def test_uninstrument_puts_the_tool_call_back_and_the_openai_instrumentor_off(smol: FakeLLMServer) -> None:
    original = Tool.__call__
    orp.instrument("smolagents")
    assert Tool.__call__ is not original
    uninstrument("smolagents")
    assert Tool.__call__ is original
    assert instrumented("openai", "smolagents") == []
    assert SmolagentsInstrumentor().is_instrumented_by_opentelemetry is False


def test_code_agent_recorded_without_its_instrumentor_is_recognised_and_never_matched(smol: FakeLLMServer) -> None:
    """Only the model SDK instrumented: dry recognises the CodeAgent by its prompt and names the tool its code
    called; a mock replay runs that tool outside the firewall and diverges instead of matching."""
    orp.instrument("openai")
    assert ask_plain("look Oslo") == "done"
    run = _last_run("plain-code-agent")
    assert [s.kind for s in run.steps] == ["model", "model"]
    assert code_tools(run) == {"get_weather", "save_note", "raw_lookup"}
    assert not_firewalled(run) == ["get_weather"]
    dry = orp.replay(run.trace_id, mode="dry")
    assert dry.readiness is not None and dry.readiness["executes_code"] is True
    assert dry.not_firewalled == ("get_weather",)
    result = orp.replay(run.trace_id, mode="mock")
    assert result.outcome == "diverged"
    assert [(d.kind, d.step_index) for d in result.divergences] == [("unrecorded_tool", 0)]
    assert "get_weather" in result.divergences[0].reason


def test_a_tool_the_last_code_called_outside_the_firewall_is_never_matched(smol: FakeLLMServer) -> None:
    """Only the model SDK instrumented, one answer whose code calls the tools and ends the run: no model call
    follows to carry their results, yet a mock replay in which they ran again reports each, at the step whose
    code called it."""
    orp.instrument("openai")
    assert ask_plain("note Oslo") == "sunny in Oslo"
    run = _last_run("plain-code-agent")
    assert [s.kind for s in run.steps] == ["model"]
    assert not_firewalled(run) == ["get_weather", "save_note"]
    result = orp.replay(run.trace_id, mode="mock")
    assert result.outcome == "diverged"
    assert [(d.kind, d.step_index) for d in result.divergences] == [("unrecorded_tool", 0), ("unrecorded_tool", 0)]
    assert all("the run ended with no tool step" in d.reason for d in result.divergences)
    assert CALLS == {"get_weather": 2, "save_note": 2}


def test_a_whatif_replay_reads_the_code_its_live_model_wrote(smol: FakeLLMServer) -> None:
    """whatif holds the tools fixed, but its models answer for real: a tool the new code calls with no tool step
    ran outside the firewall, and is reported; with the framework instrumented the same tool is a step, answered
    from the recording."""
    orp.instrument("openai")
    assert ask_plain("look Oslo") == "done"
    run = _last_run("plain-code-agent")
    requests = smol.count
    result = orp.replay(run.trace_id, mode="whatif", reason="the same model, live")
    assert smol.count == requests + 2, "whatif did not call the model"
    assert result.outcome == "diverged"
    assert [(d.kind, d.step_index) for d in result.divergences] == [("unrecorded_tool", 0)]
    assert "get_weather" in result.divergences[0].reason
    assert CALLS == {"get_weather": 2}

    orp.instrument("smolagents")
    assert ask("look Oslo") == "done"
    marked = _last_run("CodeAgent")
    again = orp.replay(marked.trace_id, mode="whatif", reason="the same model, live", entrypoint=f"{__name__}:ask")
    assert again.outcome == "matched", again.divergences
    assert CALLS == {"get_weather": 3}, "whatif ran a tool the recording answers"


def test_a_tool_the_instrumentor_cannot_see_makes_the_replay_diverge(smol: FakeLLMServer) -> None:
    """A marked run whose code called a tool that is no step (it overrides ``__call__``): dry names it, and a
    mock replay in which it ran again is never matched."""
    orp.instrument("smolagents")
    assert ask("raw Oslo") == "done"
    run = _last_run("CodeAgent")
    assert [(s.kind, s.name) for s in run.steps] == [
        ("model", "openai.chat.completions"),
        ("model", "openai.chat.completions"),
        ("tool", "final_answer"),
    ]
    assert not_firewalled(run) == ["raw_lookup"]
    result = orp.replay(run.trace_id, mode="mock", entrypoint="test_instrument_smolagents:ask")
    assert result.outcome == "diverged"
    assert [(d.kind, d.step_index) for d in result.divergences] == [("unrecorded_tool", 0)]
    assert CALLS == {"raw_lookup": 2}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('<code>\nsend_message(to="a", text=get_weather(city="b"))\n</code>', ["send_message", "get_weather"]),
        ('Thought: x\n<code>\nr = get_weather(city="b")\n', ["get_weather"]),  # the stop sequence cut </code>
        ('```py\nfor c in ["a", "b"]:\n    get_weather(city=c)\n```', ["get_weather"]),
        ("<code>\nget_weather(city=\n</code>", ["get_weather"]),  # does not parse: searched by name
        ("no code, get_weather(city='x')", []),
        ('<code>\nobj.get_weather(city="b")\nprint("send_message(")\n</code>', []),
    ],
)
def test_code_calls_reads_the_code_blobs_of_a_response(text: str, found: list[str]) -> None:
    response = {"choices": [{"message": {"role": "assistant", "content": text}}]}
    assert code_calls(response, {"get_weather", "send_message"}) == found


def test_a_run_neither_marked_nor_prompted_is_no_code_run() -> None:
    step = SimpleNamespace(
        kind="model", index=0, name="m", snapshots={"model": {"request": {"messages": [{"content": "hi"}]}}}
    )
    run = SimpleNamespace(attributes={}, steps=(step,))
    assert code_tools(run) is None  # type: ignore[arg-type]
    marked = SimpleNamespace(
        attributes={semconv.RUN_EXECUTES_CODE: "true", semconv.RUN_CODE_TOOLS: '["a","final_answer"]'}, steps=()
    )
    assert code_tools(marked) == {"a"}  # type: ignore[arg-type]  # as read back from the store
