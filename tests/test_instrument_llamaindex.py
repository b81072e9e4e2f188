"""LlamaIndex instrumentation in process: tool calls are tool steps with their risk, an agent's ``run()`` is one
run (none of its own inside an ``@orp.agent``), and ``uninstrument()`` restores LlamaIndex's methods.

The agent runs against the fake OpenAI server (it calls the first tool offered, then answers with a text quoting
the tool's result); the tools count their real executions in ``CALLS``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm_servers import FakeLLMServer
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.tools import FunctionTool, QueryEngineTool
from llama_index.llms.openai import OpenAI

import otel_replay as orp
from otel_replay import instrumentation
from otel_replay.instrumentation.llamaindex import LlamaIndexInstrumentor, declare_risk
from otel_replay.storage.store import Store
from otel_replay.testing import capture

CALLS: Counter[str] = Counter()


def send_invoice(customer: str) -> str:
    """Send an invoice to a customer."""
    CALLS["send_invoice"] += 1
    return f"invoice sent to {customer}"


def lookup_order(order: str) -> dict[str, Any]:
    """Look an order up."""
    CALLS["lookup_order"] += 1
    return {"order": order, "status": "shipped"}


class _Docs(BaseQueryEngine):
    """A query engine that answers from a fixed text (no index, no LLM)."""

    def __init__(self) -> None:
        super().__init__(callback_manager=None)

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _query(self, query_bundle: Any) -> Response:
        CALLS["docs"] += 1
        return Response(response=f"docs about {query_bundle.query_str}")

    async def _aquery(self, query_bundle: Any) -> Response:
        return self._query(query_bundle)


@pytest.fixture
def instrumented(home: Path) -> Iterator[LlamaIndexInstrumentor]:
    CALLS.clear()
    already = set(instrumentation.instrumented("openai"))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tool_risks={"lookup_order": "write"})
    try:
        yield instrumentor
    finally:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        if "openai" not in already:
            instrumentation.uninstrument("openai")


def test_tool_calls_are_steps_with_their_risk(home: Path, instrumented: LlamaIndexInstrumentor) -> None:
    send = FunctionTool.from_defaults(fn=send_invoice)
    lookup = FunctionTool.from_defaults(fn=lookup_order)
    marked = declare_risk(FunctionTool.from_defaults(fn=lookup_order, name="read_order"), "read")
    docs = QueryEngineTool.from_defaults(query_engine=_Docs(), name="docs", description="Product docs.")

    @orp.agent("billing")
    def billing() -> list[str]:
        out = [send.call(customer="ACME").content, lookup(order="A1").content, marked.call(order="A2").content]
        out.append(asyncio.run(docs.acall(input="refunds")).content)
        return out

    with capture(home=home) as recorded:
        assert billing() == [
            "invoice sent to ACME",
            "{'order': 'A1', 'status': 'shipped'}",
            "{'order': 'A2', 'status': 'shipped'}",
            "docs about refunds",
        ]
    (run,) = recorded.runs()
    steps = [(s.kind, s.name, s.attributes["otel_replay.tool.risk"]) for s in run.steps]
    assert steps == [
        ("tool", "send_invoice", "high"),  # the name rule: send_…
        ("tool", "lookup_order", "write"),  # tool_risks=
        ("tool", "read_order", "read"),  # declare_risk()
        ("tool", "docs", "read"),
    ]
    assert all(s.attributes["otel_replay.step.instrumentation"] == "llamaindex" for s in run.steps)
    tool = run.steps[1].snapshots["tool"]
    assert tool["arguments"] == {"order": "A1"}
    assert tool["result"] == {
        "content": "{'order': 'A1', 'status': 'shipped'}",
        "raw_output": {"order": "A1", "status": "shipped"},
        "is_error": False,
    }


def test_a_tool_called_outside_any_run_is_a_run_of_one_step(home: Path, instrumented: LlamaIndexInstrumentor) -> None:
    send = FunctionTool.from_defaults(fn=send_invoice)
    with capture(home=home) as recorded:
        send.call(customer="ACME")
    (run,) = recorded.runs()
    assert run.summary.agent == "send_invoice"
    assert [(s.kind, s.name) for s in run.steps] == [("tool", "send_invoice")]


def test_an_agent_run_is_one_run_and_none_inside_an_agent(home: Path, instrumented: LlamaIndexInstrumentor) -> None:
    with FakeLLMServer(tool_args_for={"send_invoice": {"customer": "ACME"}}) as server:
        llm = OpenAI(model="gpt-4o-mini", api_base=server.openai_url, api_key="sk-test-" + "3" * 32)
        agent = FunctionAgent(tools=[send_invoice, lookup_order], llm=llm, system_prompt="You bill.")

        async def ask(question: str) -> str:
            return str(await agent.run(user_msg=question))

        @orp.agent("outer")
        def outer() -> str:
            return asyncio.run(ask("bill ACME"))

        with capture(home=home) as recorded:
            answer = asyncio.run(ask("bill ACME"))
            assert outer() == answer
    assert "invoice sent to ACME" in answer
    implicit, decorated = recorded.runs()
    assert implicit.summary.agent == "Agent"  # FunctionAgent's default name
    for run in (implicit, decorated):
        assert [(s.kind, s.name) for s in run.steps] == [
            ("model", "openai.chat.completions"),
            ("tool", "send_invoice"),
            ("model", "openai.chat.completions"),
        ]
    assert decorated.summary.agent == "outer"
    assert CALLS["send_invoice"] == 2


def test_uninstrument_restores_llamaindex(home: Path, instrumented: LlamaIndexInstrumentor) -> None:
    import workflows.plugins.basic
    from llama_index.core.agent.workflow.base_agent import BaseWorkflowAgent

    targets: list[tuple[Any, str]] = [
        (FunctionTool, "call"),
        (FunctionTool, "acall"),
        (QueryEngineTool, "acall"),
        (BaseWorkflowAgent, "run"),
        (workflows.plugins.basic, "as_step_worker_functions"),
    ]
    instrumented.uninstrument()
    originals = [owner.__dict__[method] for owner, method in targets]  # LlamaIndex's own (wrapt) span wrappers
    instrumented.instrument()
    assert all(owner.__dict__[method] is not original for (owner, method), original in zip(targets, originals))
    instrumented.uninstrument()
    assert all(owner.__dict__[method] is original for (owner, method), original in zip(targets, originals))
    with capture(home=home) as recorded:
        FunctionTool.from_defaults(fn=send_invoice).call(customer="ACME")
    assert recorded.runs() == []
    assert CALLS["send_invoice"] == 1


def test_the_zero_code_entry_point_arms_the_instrumentor(home: Path) -> None:
    """``opentelemetry-instrument`` finds ``otel_replay_llamaindex``; its stand-in instruments LlamaIndex (imported
    here already: at once) and its ``uninstrument()`` undoes that."""
    from importlib.metadata import entry_points

    from otel_replay.instrumentation import entry_points as stand_ins

    found = {e.name: e.value for e in entry_points(group="opentelemetry_instrumentor")}
    assert found["otel_replay_llamaindex"] == "otel_replay.instrumentation.entry_points:llamaindex"
    already = set(instrumentation.instrumented("openai"))
    stand_in = stand_ins.llamaindex()
    stand_in.instrument()
    try:
        assert LlamaIndexInstrumentor().is_instrumented_by_opentelemetry
        assert instrumentation.instrumented("llamaindex", "openai") == ["llamaindex", "openai"]
    finally:
        stand_in.uninstrument()
        if "openai" not in already:
            instrumentation.uninstrument("openai")
    assert not LlamaIndexInstrumentor().is_instrumented_by_opentelemetry


def test_an_agent_workflow_run_is_one_run(home: Path, instrumented: LlamaIndexInstrumentor) -> None:
    from llama_index.core.agent.workflow import AgentWorkflow

    with FakeLLMServer(tool_args_for={"send_invoice": {"customer": "ACME"}}) as server:
        llm = OpenAI(model="gpt-4o-mini", api_base=server.openai_url, api_key="sk-test-" + "3" * 32)
        workflow = AgentWorkflow.from_tools_or_functions([send_invoice], llm=llm, system_prompt="You bill.")

        async def ask() -> str:
            return str(await workflow.run(user_msg="bill ACME"))

        with capture(home=home) as recorded:
            answer = asyncio.run(ask())
    assert "invoice sent to ACME" in answer
    (run,) = recorded.runs()
    assert run.summary.agent == "Agent"  # the root agent's name
    assert [(s.kind, s.name) for s in run.steps] == [
        ("model", "openai.chat.completions"),
        ("tool", "send_invoice"),
        ("model", "openai.chat.completions"),
    ]


HANDOFF: dict[str, FakeLLMServer] = {}
"""The fake server :func:`handoff_ask` talks to (a replay imports this module again and calls it)."""


async def handoff_ask(input: str) -> str:  # noqa: A002 - the name a replay passes
    """``entrypoint`` of the replay: LlamaIndex's multi-agent ``AgentWorkflow``, a triage agent handing over to a
    billing agent with the workflow's generated ``handoff`` tool."""
    from llama_index.core.agent.workflow import AgentWorkflow

    server = HANDOFF["fake"]
    llm = OpenAI(model="gpt-4o-mini", api_base=server.openai_url, api_key="sk-test-" + "3" * 32)
    triage = FunctionAgent(
        name="triage", description="Routes requests.", system_prompt="Hand billing to billing.", llm=llm,
        tools=[], can_handoff_to=["billing"],
    )  # fmt: skip
    billing = FunctionAgent(
        name="billing", description="Bills customers.", system_prompt="You bill.", llm=llm, tools=[send_invoice]
    )
    workflow = AgentWorkflow(agents=[triage, billing], root_agent="triage")
    return str(await workflow.run(user_msg=input))


def test_an_agent_workflow_handoff_is_a_handoff_step_that_still_hands_over_in_a_replay(
    home: Path, instrumented: LlamaIndexInstrumentor
) -> None:
    """The workflow's ``handoff`` tool is a ``handoff`` step (no risk, ``otel_replay.handoff.to``). Answered from
    the recording, it must still set the workflow's next agent: before, a mock replay of unchanged code went on
    with the triage agent and diverged at the next model request."""
    args = {"handoff": {"to_agent": "billing", "reason": "a bill"}, "send_invoice": {"customer": "ACME"}}
    with FakeLLMServer(per_agent_tools=True, tool_args_for=args) as server:
        HANDOFF["fake"] = server
        asyncio.run(handoff_ask("bill ACME"))
        orp.flush()
        with Store.open() as store:
            run = store.load_run(store.runs(agent="triage", kind="original")[0].trace_id)
        steps = sorted(run.steps, key=lambda s: s.index)
        handoff = next(s for s in steps if s.name == "handoff")
        assert handoff.kind == "handoff" and handoff.attributes.get("otel_replay.handoff.to") == "billing"
        assert "otel_replay.tool.risk" not in handoff.attributes
        sent, calls = server.count, Counter(CALLS)
        for mode in ("mock", "deterministic"):
            result = orp.replay(run.trace_id, mode=mode, entrypoint=f"{__name__}:handoff_ask")
            assert result.outcome == "matched", (mode, result.divergences)
        assert server.count == sent and calls == CALLS, "an offline replay called the model or a tool"


REACT: dict[str, FakeLLMServer] = {}
"""The fake server :func:`react_ask` talks to (a replay imports this module again and calls it)."""
REACT_ANSWERS = [
    "Thought: I need to use a tool to help me answer the question.\n"
    'Action: send_invoice\nAction Input: {"customer": "ACME"}',
    "Thought: I can answer without using any more tools.\nAnswer: invoice sent to ACME",
]


async def react_ask(input: str) -> str:  # noqa: A002 - the name a replay passes
    """``entrypoint`` of the replay: a ``ReActAgent`` (tools chosen in the model's text, not by tool calls)."""
    from llama_index.core.agent.workflow import ReActAgent

    server = REACT["fake"]
    llm = OpenAI(model="gpt-4o-mini", api_base=server.openai_url, api_key="sk-test-" + "3" * 32)
    agent = ReActAgent(tools=[send_invoice, lookup_order], llm=llm)
    return str(await agent.run(user_msg=input))


def test_a_react_agent_run_is_one_run_and_a_mock_replay_matches(
    home: Path, instrumented: LlamaIndexInstrumentor
) -> None:
    with FakeLLMServer() as server:
        server.chat_texts["bill ACME"] = REACT_ANSWERS  # the ReAct format, parsed by the agent
        REACT["fake"] = server
        answer = asyncio.run(react_ask("bill ACME"))
        assert answer == "invoice sent to ACME"
        orp.flush()
        with Store.open() as store:
            (summary,) = store.runs(kind="original")
            run = store.load_run(summary.trace_id)
        assert run.summary.agent == "Agent"  # ReActAgent's default name
        assert [(s.kind, s.name) for s in run.steps] == [
            ("model", "openai.chat.completions"),
            ("tool", "send_invoice"),
            ("model", "openai.chat.completions"),
        ]
        assert run.steps[1].snapshots["tool"]["arguments"] == {"customer": "ACME"}
        assert run.steps[1].attributes["otel_replay.tool.risk"] == "high"  # the name rule: send_…
        assert run.snapshots["input"]["kwargs"] == {"input": "bill ACME"}
        assert CALLS == {"send_invoice": 1}

        requests = server.count
        result = orp.replay(run.trace_id, mode="mock", entrypoint="test_instrument_llamaindex:react_ask")
        assert result.outcome == "matched", result.divergences
        assert server.count == requests, "a mock replay sent a request to the server"
        assert CALLS == {"send_invoice": 1}, "a mock replay ran the tool"


# ------------------------------------------------------------------------------------------- CodeActAgent


class SimpleCodeExecutor:
    """The code executor of LlamaIndex's ``CodeActAgent`` docs: runs the model's code with the tools' functions
    in its namespace and gives back what it printed."""

    def __init__(self, locals: dict[str, Any], globals: dict[str, Any]) -> None:  # noqa: A002 - the docs' names
        self.globals = globals
        self.locals = locals

    def execute(self, code: str) -> str:
        import contextlib
        import io

        stdout = io.StringIO()
        try:
            with contextlib.redirect_stdout(stdout):
                exec(code, self.globals, self.locals)  # what a code agent does
        except Exception as exc:  # noqa: BLE001 - the agent shows the model the error
            return f"Error: {type(exc).__name__}: {exc}"
        return stdout.getvalue()


CODEACT: dict[str, Any] = {}
CODEACT_ANSWERS = [
    "I will send the invoice.\n<execute>\nprint(send_invoice('ACME'))\n</execute>",
    "The invoice was sent to ACME.",
]


@orp.tool("send_invoice", risk="write")
def send_invoice_step(customer: str) -> str:
    """``send_invoice`` decorated: each call from the model's code is a step of its own."""
    return send_invoice(customer)


async def codeact_ask(input: str) -> str:  # noqa: A002 - the name a replay passes
    """``entrypoint`` of the replay: a ``CodeActAgent`` as its docs build one; its code calls ``send_invoice``
    (the decorated function when ``CODEACT["decorated"]``)."""
    from llama_index.core.agent.workflow import CodeActAgent

    server = CODEACT["fake"]
    function = send_invoice_step if CODEACT.get("decorated") else send_invoice
    executor = SimpleCodeExecutor(locals={"send_invoice": function}, globals={"__builtins__": __builtins__})
    llm = OpenAI(model="gpt-4o-mini", api_base=server.openai_url, api_key="sk-test-" + "3" * 32)
    agent = CodeActAgent(code_execute_fn=executor.execute, llm=llm, tools=[send_invoice])
    return str(await agent.run(user_msg=input))


@pytest.mark.parametrize("decorated", [False, True], ids=["plain", "decorated"])
def test_a_code_act_agent_is_a_code_agent_whose_code_runs_only_in_its_execute_step(
    home: Path, instrumented: LlamaIndexInstrumentor, decorated: bool
) -> None:
    """The run is marked as one that executes model-written code (``dry`` says so). The code runs inside the
    agent's ``execute`` tool step (high risk by its name): a mock replay answers the execution from the
    recording, so the function the code calls does not run, and matches (a decorated function's step, made
    inside ``execute``, is not missing: the answered execution made none); a live replay needs the approval of
    ``execute`` before anything runs."""
    with FakeLLMServer() as server:
        server.chat_texts["bill ACME"] = CODEACT_ANSWERS
        CODEACT.update(fake=server, decorated=decorated)
        answer = asyncio.run(codeact_ask("bill ACME"))
        assert answer == "The invoice was sent to ACME."
        assert CALLS == {"send_invoice": 1}
        orp.flush()
        with Store.open() as store:
            (summary,) = store.runs(kind="original")
            run = store.load_run(summary.trace_id)
        assert run.attributes["otel_replay.run.executes_code"] in (True, "true")
        steps = [(s.kind, s.name, s.attributes.get("otel_replay.tool.risk")) for s in run.steps]
        inner = [("tool", "send_invoice", "write")] if decorated else []
        assert steps == [
            ("model", "openai.chat.completions", None),
            ("tool", "execute", "high"),
            *inner,
            ("model", "openai.chat.completions", None),
        ]
        assert run.steps[1].snapshots["tool"]["result"]["content"] == "invoice sent to ACME\n"

        entry = "test_instrument_llamaindex:codeact_ask"
        dry = orp.replay(run.trace_id, mode="dry", entrypoint=entry)
        assert dry.readiness["executes_code"] is True
        assert dry.readiness["modes"]["live"]["needs_approval"] == ["execute", *(["send_invoice"] if decorated else [])]
        requests = server.count
        result = orp.replay(run.trace_id, mode="mock", entrypoint=entry)
        assert result.outcome == "matched", result.divergences
        assert server.count == requests, "a mock replay sent a request to the server"
        assert CALLS == {"send_invoice": 1}, "a mock replay ran the model's code"
        refused = orp.replay(run.trace_id, mode="live", reason="check", entrypoint=entry)
        assert refused.outcome == "refused" and "--approve execute" in (refused.refusal or ""), refused.refusal
        assert CALLS == {"send_invoice": 1} and server.count == requests
