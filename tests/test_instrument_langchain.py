"""LangChain core / LangGraph instrumentation end to end: a real LangGraph agent, recorded, shown, replayed.

The agent is a small ``StateGraph``: a retriever node (a ``BaseRetriever`` over in-memory Documents), a model
node (a tool-calling ``BaseChatModel`` of our own that scripts its answers from the conversation) and
LangGraph's prebuilt ``ToolNode`` with two real ``@tool`` tools: ``lookup_order`` (read) and
``settle_account`` (high risk through ``LangChainInstrumentor(tool_risks=...)``; it appends a line to a file,
a side effect a replay must not repeat). Every real call of the model, the tools and the retriever is counted
in ``CALLS``, so a test can show that a mock or deterministic replay reached none of them.

The agents live in this module (importable as ``test_instrument_langchain:NAME``, tests/ is on sys.path)
because a replay re-imports the recorded entrypoint. ``PROMPT`` holds the system prompt, so a test can record,
change the prompt, and replay.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition
from typing_extensions import TypedDict

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.langchain import LangChainInstrumentor
from otel_replay.recording import in_run
from otel_replay.risk import effective_risk
from otel_replay.storage.store import Store

SIDE_FILE_ENV = "LC_TEST_SETTLEMENTS"
CALLS: Counter[str] = Counter()
"""Real executions: ``model``, ``lookup_order``, ``settle_account``, ``retriever``."""

PROMPT_DEFAULT = "You are the billing assistant. Use the policy below."
PROMPT: dict[str, str] = {"system": PROMPT_DEFAULT}

TOOL_RISKS = {"settle_account": "high"}


# ------------------------------------------------------------------------------------------ the agent


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by id."""
    CALLS["lookup_order"] += 1
    return {"order_id": order_id, "amount": 42, "account": "acc-7"}


@tool
def settle_account(account: str, amount: int) -> str:
    """Settle an account by paying out the amount (writes to the settlement ledger)."""
    CALLS["settle_account"] += 1
    with Path(os.environ[SIDE_FILE_ENV]).open("a", encoding="utf-8") as fh:
        fh.write(f"{account} {amount}\n")
    return f"settled {amount} on {account}"


@tool
def tag_order(order_id: str) -> str:
    """Tag an order (marked as a write tool through its metadata)."""
    return f"tagged {order_id}"


tag_order.metadata = {"otel_replay_risk": "write"}


class ScriptedChatModel(BaseChatModel):
    """A tool-calling chat model that answers from the conversation so far; counts its real calls."""

    model: str = "scripted-lc-1"

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model}

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _decide(self, messages: list[BaseMessage]) -> AIMessage:
        CALLS["model"] += 1
        last = messages[-1]
        usage = {"input_tokens": 10 * len(messages), "output_tokens": 5, "total_tokens": 10 * len(messages) + 5}
        meta = {"model_name": self.model, "finish_reason": "tool_calls"}
        if isinstance(last, HumanMessage):
            order = str(last.content).split()[-1]
            return AIMessage(
                content="",
                tool_calls=[{"name": "lookup_order", "args": {"order_id": order}, "id": "call_lookup_1"}],
                usage_metadata=usage,
                response_metadata=meta,
            )
        if isinstance(last, ToolMessage) and last.name == "lookup_order":
            return AIMessage(
                content="",
                tool_calls=[
                    {"name": "settle_account", "args": {"account": "acc-7", "amount": 42}, "id": "call_settle_1"}
                ],
                usage_metadata=usage,
                response_metadata=meta,
            )
        return AIMessage(
            content=f"Done: {last.content}", usage_metadata=usage, response_metadata={**meta, "finish_reason": "stop"}
        )

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._decide(messages))])

    def _stream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        message = self._decide(messages)
        words = str(message.content).split(" ")
        for i, word in enumerate(words):
            first, last = i == 0, i == len(words) - 1
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=word if first else f" {word}",
                    tool_call_chunks=[
                        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": n}
                        for n, c in enumerate(message.tool_calls)
                    ]
                    if first
                    else [],
                    usage_metadata=message.usage_metadata if last else None,
                    response_metadata=message.response_metadata if last else {},
                )
            )


class PolicyRetriever(BaseRetriever):
    """Documents whose text shares a word with the query, best first (score in the metadata)."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        CALLS["retriever"] += 1
        words = set(query.lower().split())
        scored = []
        for doc in self.docs:
            score = len(words & set(doc.page_content.lower().split())) / max(len(words), 1)
            if score:
                scored.append(
                    Document(
                        page_content=doc.page_content, id=doc.id, metadata={**doc.metadata, "score": round(score, 3)}
                    )
                )
        return sorted(scored, key=lambda d: -d.metadata["score"])[:2]


DOCS = [
    Document(
        id="kb-refund",
        page_content="refund orders within 30 days to the account on file",
        metadata={"source": "kb/refund-policy.md"},
    ),
    Document(id="kb-ship", page_content="shipping takes 3 days", metadata={"source": "kb/shipping.md"}),
]


class State(TypedDict):
    question: str
    context: str
    messages: Annotated[list[BaseMessage], add_messages]


def build_graph() -> Any:
    """retrieve → agent ⇄ tools → end."""
    model = ScriptedChatModel().bind_tools([lookup_order, settle_account])
    retriever = PolicyRetriever(docs=DOCS)

    def retrieve(state: State) -> dict[str, Any]:
        docs = retriever.invoke(state["question"])
        return {"context": "\n".join(d.page_content for d in docs)}

    def agent_node(state: State) -> dict[str, Any]:
        system = SystemMessage(f"{PROMPT['system']}\n{state['context']}")
        return {"messages": [model.invoke([system, *state["messages"]])]}

    async def aretrieve(state: State) -> dict[str, Any]:
        docs = await retriever.ainvoke(state["question"])
        return {"context": "\n".join(d.page_content for d in docs)}

    async def aagent_node(state: State) -> dict[str, Any]:
        system = SystemMessage(f"{PROMPT['system']}\n{state['context']}")
        return {"messages": [await model.ainvoke([system, *state["messages"]])]}

    graph = StateGraph(State)
    graph.add_node("retrieve", _dual(retrieve, aretrieve))
    graph.add_node("agent", _dual(agent_node, aagent_node))
    graph.add_node("tools", ToolNode([lookup_order, settle_account]))
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def _dual(sync: Any, asynchronous: Any) -> Any:
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(sync, afunc=asynchronous)


def _question(order: str) -> dict[str, Any]:
    question = f"please refund order {order}"
    return {"question": question, "messages": [HumanMessage(question)]}


@orp.agent("lc-billing")
def billing_agent(order: str) -> str:
    """The LangGraph agent as an otel-replay entrypoint."""
    out = build_graph().invoke(_question(order))
    return str(out["messages"][-1].content)


@orp.agent("lc-billing-async")
async def billing_agent_async(order: str) -> str:
    """The same agent through ``ainvoke`` (async model, tools and retriever)."""
    out = await build_graph().ainvoke(_question(order))
    return str(out["messages"][-1].content)


@orp.agent("lc-stream")
def streaming_agent(question: str) -> str:
    """A chat model streamed directly (``BaseChatModel.stream``), with a tool called between two chunks."""
    last = ToolMessage("the order is settled", tool_call_id="c0", name="settle_account")
    text = []
    for i, chunk in enumerate(ScriptedChatModel().stream([HumanMessage(question), last])):
        if i == 0:
            lookup_order.invoke({"order_id": "S1"})
        text.append(str(chunk.content))
    return "".join(text)


@orp.agent("lc-astream")
async def astreaming_agent(question: str) -> str:
    """A chat model streamed with ``astream``."""
    last = ToolMessage("the order is settled", tool_call_id="c0", name="settle_account")
    return "".join([str(c.content) async for c in ScriptedChatModel().astream([HumanMessage(question), last])])


@orp.agent("lc-messages")
def messages_agent(order: str) -> dict[str, Any]:
    """The graph streamed in LangGraph's ``messages`` mode: the model streams inside ``invoke``."""
    kinds, text = set(), []
    for chunk, _ in build_graph().stream(_question(order), stream_mode="messages"):
        if isinstance(chunk, AIMessageChunk):
            kinds.add(type(chunk).__name__)
            text.append(str(chunk.content))
    return {"answer": "".join(text), "kinds": sorted(kinds)}


@tool
def count_notes(topic: str, state: Annotated[dict, InjectedState]) -> str:
    """Count the messages about a topic (LangGraph injects the graph state)."""
    CALLS["count_notes"] += 1
    return f"{topic}: {len(state['messages'])} messages"


@orp.agent("lc-injected")
def injected_agent(topic: str) -> str:
    """A ToolNode call whose injected state holds a per-run message id."""
    call = AIMessage(
        "", id=str(uuid.uuid4()), tool_calls=[{"name": "count_notes", "args": {"topic": topic}, "id": "call_notes"}]
    )
    graph = StateGraph(State)
    graph.add_node("tools", ToolNode([count_notes]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    out = graph.compile().invoke({"question": topic, "context": "", "messages": [call]})
    return str(out["messages"][-1].content)


class LedgerError(Exception):
    """The ledger refused a read."""


@tool
def read_ledger(account: str) -> str:
    """Read an account's ledger (always fails here)."""
    CALLS["read_ledger"] += 1
    raise LedgerError(f"ledger locked for {account}")


@orp.agent("lc-ledger")
def ledger_agent(account: str) -> str:
    """A tool whose exception ends the run."""
    return str(read_ledger.invoke({"account": account}))


def graph_entry(input: dict[str, Any]) -> Any:  # noqa: A002 - the implicit run records the graph input as "input"
    """``--app`` entrypoint for a run the instrumentor began implicitly at ``graph.invoke``."""
    return build_graph().invoke(input)


# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def lc(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Instrumented LangChain, a settlement ledger file, counters and the prompt reset."""
    ledger = tmp_path / "settlements.log"
    monkeypatch.setenv(SIDE_FILE_ENV, str(ledger))
    CALLS.clear()
    PROMPT["system"] = PROMPT_DEFAULT
    instrumentor = LangChainInstrumentor(tool_risks=TOOL_RISKS)
    instrumentor.instrument()
    try:
        yield {"home": home, "ledger": ledger, "instrumentor": instrumentor}
    finally:
        instrumentor.uninstrument()
        PROMPT["system"] = PROMPT_DEFAULT


def settlements(ledger: Path) -> int:
    return len(ledger.read_text(encoding="utf-8").splitlines()) if ledger.exists() else 0


def record(agent_name: str, func: Any, *args: Any) -> tuple[Any, str]:
    """Run ``func(*args)`` (an ``@orp.agent``), flush, return its result and the trace id of its run."""
    result = asyncio.run(func(*args)) if asyncio.iscoroutinefunction(func) else func(*args)
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent_name, kind="original")
    return result, summary.trace_id


def load(trace_id: str) -> orp.Run:
    with Store.open() as store:
        return store.load_run(trace_id)


EXPECTED_STEPS = [
    ("retrieval", "PolicyRetriever"),
    ("model", "ScriptedChatModel"),
    ("tool", "lookup_order"),
    ("model", "ScriptedChatModel"),
    ("tool", "settle_account"),
    ("model", "ScriptedChatModel"),
]


# ---------------------------------------------------------------------------------------------- tests


def test_records_a_langgraph_agent_step_by_step(lc: dict[str, Any]) -> None:
    answer, trace_id = record("lc-billing", billing_agent, "A17")
    assert answer == "Done: settled 42 on acc-7"
    assert CALLS == {"retriever": 1, "model": 3, "lookup_order": 1, "settle_account": 1}
    assert settlements(lc["ledger"]) == 1
    run = load(trace_id)
    assert [(s.kind, s.name) for s in run.steps] == EXPECTED_STEPS
    assert run.entrypoint == "test_instrument_langchain:billing_agent"

    retrieval = run.steps[0]
    snap = retrieval.snapshots["retrieval"]
    assert snap["query"] == "please refund order A17"
    assert [(r["id"], r["citation"]) for r in snap["results"]] == [("kb-refund", "kb/refund-policy.md")]
    assert snap["results"][0]["score"] == pytest.approx(0.25)
    assert retrieval.attributes[semconv.RETRIEVAL_RESULT_COUNT] == "1"

    model = run.steps[1]
    assert model.attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert model.attributes[semconv.GEN_AI_REQUEST_MODEL] == "scripted-lc-1"
    assert model.attributes[semconv.GEN_AI_RESPONSE_MODEL] == "scripted-lc-1"
    assert model.attributes[semconv.GEN_AI_PROVIDER_NAME] == "scriptedchatmodel"
    assert model.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == "20"
    assert model.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == "5"
    request = model.snapshots["model"]["request"]
    assert [m["type"] for m in request["messages"]] == ["system", "human"]
    assert PROMPT_DEFAULT in request["messages"][0]["content"]
    assert [t["function"]["name"] for t in request["params"]["tools"]] == ["lookup_order", "settle_account"]
    response = model.snapshots["model"]["response"]
    message = response["generations"][0]["message"]
    assert message["data"]["tool_calls"][0]["name"] == "lookup_order"
    assert message["data"]["usage_metadata"]["input_tokens"] == 20

    lookup, settle = run.steps[2], run.steps[4]
    assert lookup.attributes[semconv.TOOL_RISK] == "read"
    assert settle.attributes[semconv.TOOL_RISK] == "high"
    assert lookup.snapshots["tool"]["arguments"] == {"order_id": "A17"}
    tool_result = lookup.snapshots["tool"]["result"]
    assert tool_result["type"] == "tool" and tool_result["data"]["tool_call_id"] == "call_lookup_1"
    assert run.attributes[semconv.RUN_INPUT_TOKENS] == str(20 + 40 + 60)


@pytest.mark.parametrize("mode", ["mock", "deterministic"])
def test_replay_answers_every_call_from_the_recording(lc: dict[str, Any], mode: str) -> None:
    _, trace_id = record("lc-billing", billing_agent, "A17")
    CALLS.clear()
    result = orp.replay(trace_id, mode=mode)
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}, "a replayed call reached the real model, tool or retriever"
    assert settlements(lc["ledger"]) == 1
    replayed = result.replay
    assert replayed is not None
    assert [(s.kind, s.name) for s in replayed.steps] == EXPECTED_STEPS
    assert {s.attributes[semconv.REPLAY_SERVED] for s in replayed.steps} == {"recording"}
    assert replayed.snapshots["output"]["answer"] == "Done: settled 42 on acc-7"


def test_async_agent_records_and_replays(lc: dict[str, Any]) -> None:
    answer, trace_id = record("lc-billing-async", billing_agent_async, "B2")
    assert answer == "Done: settled 42 on acc-7"
    assert [(s.kind, s.name) for s in load(trace_id).steps] == EXPECTED_STEPS
    CALLS.clear()
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}
    assert settlements(lc["ledger"]) == 1


def test_changed_prompt_is_a_request_divergence_at_the_model_step(lc: dict[str, Any]) -> None:
    _, trace_id = record("lc-billing", billing_agent, "A17")
    PROMPT["system"] = "You are a terse billing assistant."
    CALLS.clear()
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "diverged"
    first = result.first_divergence
    assert first is not None and (first.kind, first.step_index) == ("request", 1)
    assert CALLS == {}, "deterministic replay stops at the changed request without calling anything"
    steps = result.replay.steps if result.replay else ()
    assert [(s.kind, s.attributes.get(semconv.REPLAY_SERVED)) for s in steps] == [
        ("retrieval", "recording"),
        ("model", "refused"),
    ]

    mock = orp.replay(trace_id, mode="mock")  # mock reports the difference and answers anyway
    assert [(d.kind, d.step_index) for d in mock.divergences] == [("request", 1), ("request", 3), ("request", 5)]
    assert CALLS == {}


def test_live_replay_refuses_the_high_risk_tool_without_approval(lc: dict[str, Any]) -> None:
    _, trace_id = record("lc-billing", billing_agent, "A17")
    CALLS.clear()
    result = orp.replay(trace_id, mode="live", reason="verify the fix")
    assert result.outcome == "refused"
    assert result.refusal and "settle_account" in result.refusal
    assert result.refused_before_start, "a recorded high tool without an approval: refused before anything ran"
    assert CALLS == {}
    assert settlements(lc["ledger"]) == 1

    approved = orp.replay(trace_id, mode="live", reason="verify the fix", approvals=["settle_account"])
    assert approved.outcome == "matched", approved.divergences
    assert settlements(lc["ledger"]) == 2


def test_partial_replay_answers_the_prefix_and_runs_the_rest(lc: dict[str, Any]) -> None:
    _, trace_id = record("lc-billing", billing_agent, "A17")
    CALLS.clear()
    result = orp.replay(trace_id, mode="live", from_step=4, approvals=["settle_account"], reason="resume")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {"settle_account": 1, "model": 1}
    assert settlements(lc["ledger"]) == 2
    served = [s.attributes[semconv.REPLAY_SERVED] for s in result.replay.steps] if result.replay else []
    assert served == ["recording"] * 4 + ["executed"] * 2


def test_injected_state_is_not_part_of_the_tool_arguments(lc: dict[str, Any]) -> None:
    answer, trace_id = record("lc-injected", injected_agent, "refunds")
    assert answer == "refunds: 1 messages"
    (step,) = load(trace_id).steps
    assert step.snapshots["tool"]["arguments"] == {"topic": "refunds"}
    CALLS.clear()
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}


def test_streamed_model_is_one_step_replayed_as_a_chunk(lc: dict[str, Any]) -> None:
    answer, trace_id = record("lc-stream", streaming_agent, "how is my order")
    assert answer == "Done: the order is settled"
    assert CALLS == {"model": 1, "lookup_order": 1}
    run = load(trace_id)
    assert [(s.kind, s.name) for s in run.steps] == [("model", "ScriptedChatModel"), ("tool", "lookup_order")]
    model, tool_step = run.steps
    assert tool_step.parent_span_id == model.parent_span_id, "a call between chunks is not nested in the stream"
    message = model.snapshots["model"]["response"]["generations"][0]["message"]
    assert message["type"] == "AIMessageChunk" and message["data"]["content"] == answer
    assert model.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == "5"
    CALLS.clear()
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}


def test_async_stream_records_and_replays(lc: dict[str, Any]) -> None:
    answer, trace_id = record("lc-astream", astreaming_agent, "how is my order")
    assert answer == "Done: the order is settled"
    (step,) = load(trace_id).steps
    assert (step.kind, step.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]) == ("model", "5")
    CALLS.clear()
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}


def test_graph_streamed_in_messages_mode_replays_its_chunks(lc: dict[str, Any]) -> None:
    answer, trace_id = record("lc-messages", messages_agent, "M1")
    assert answer == {"answer": "Done: settled 42 on acc-7", "kinds": ["AIMessageChunk"]}
    assert [(s.kind, s.name) for s in load(trace_id).steps] == EXPECTED_STEPS
    CALLS.clear()
    result = orp.replay(trace_id, mode="deterministic")
    assert result.outcome == "matched", result.divergences
    assert CALLS == {}
    assert result.replay is not None
    assert result.replay.snapshots["output"]["structured"] == answer


def test_graph_outside_any_run_records_an_implicit_run(lc: dict[str, Any]) -> None:
    out = build_graph().invoke(_question("C3"))
    assert out["messages"][-1].content == "Done: settled 42 on acc-7"
    updates = []
    for update in build_graph().stream(_question("C4")):
        assert not in_run(), "a streamed graph's run stays in its own context between items"
        updates.append(update)
    assert [next(iter(u)) for u in updates] == ["retrieve", "agent", "tools", "agent", "tools", "agent"]
    orp.flush()
    with Store.open() as store:
        summaries = store.runs(agent="LangGraph", kind="original")
        runs = [store.load_run(s.trace_id) for s in summaries]
    assert len(runs) == 2
    for run in runs:
        assert [(s.kind, s.name) for s in run.steps] == EXPECTED_STEPS
        assert not run.entrypoint
    summary = next(s for s, r in zip(summaries, runs) if "C3" in str(r.snapshots["input"]))
    CALLS.clear()
    result = orp.replay(summary.trace_id, mode="mock", entrypoint="test_instrument_langchain:graph_entry")
    assert [d.kind for d in result.divergences if d.kind != "output"] == []
    assert CALLS == {}


def test_a_model_called_alone_outside_a_run_is_a_run_of_one_step(lc: dict[str, Any]) -> None:
    message = ScriptedChatModel().invoke("please refund order D4")
    assert message.tool_calls[0]["args"] == {"order_id": "D4"}
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="ScriptedChatModel", kind="original")
        run = store.load_run(summary.trace_id)
    assert [(s.kind, s.name) for s in run.steps] == [("model", "ScriptedChatModel")]


def test_tool_risk_from_map_metadata_and_name(lc: dict[str, Any]) -> None:
    instrumentor: LangChainInstrumentor = lc["instrumentor"]
    assert instrumentor.risk_of(settle_account) == "high"
    assert instrumentor.risk_of(tag_order) == "write"
    assert instrumentor.risk_of(lookup_order) is None  # undeclared: the recorder's name heuristic decides

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return "sent"

    @orp.agent("lc-risks")
    def risks() -> None:
        tag_order.invoke({"order_id": "X"})
        send_email.invoke({"to": "a@example.com"})
        lookup_order.invoke({"order_id": "X"})

    risks()
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="lc-risks")
        run = store.load_run(summary.trace_id)
    assert [(s.name, s.attributes[semconv.TOOL_RISK]) for s in run.steps] == [
        ("tag_order", "write"),
        ("send_email", "high"),
        ("lookup_order", "read"),
    ]
    with pytest.raises(ValueError, match="risk must be one of"):
        LangChainInstrumentor(tool_risks={"x": "dangerous"})


def test_handoff_tools_of_multi_agent_frameworks_are_handoff_steps_without_a_risk(lc: dict[str, Any]) -> None:
    """``transfer_to_…`` tools that langgraph-supervisor and langgraph-swarm generate route inside the graph: each
    call is a ``handoff`` step naming its target, with no risk (not ``high`` by the name rule); a declared risk is
    recorded on it, and a user's ``transfer_funds`` stays a ``high`` tool."""
    from langgraph_supervisor import create_handoff_tool as supervisor_handoff
    from langgraph_swarm import create_handoff_tool as swarm_handoff

    instrumentor: LangChainInstrumentor = lc["instrumentor"]
    to_flights, to_bob = supervisor_handoff(agent_name="flight_assistant"), swarm_handoff(agent_name="Bob")
    assert [t.name for t in (to_flights, to_bob)] == ["transfer_to_flight_assistant", "transfer_to_bob"]
    assert effective_risk("transfer_to_flight_assistant", None) == "high"  # what the name alone would say
    declared = swarm_handoff(agent_name="payments")
    declared.metadata = {**(declared.metadata or {}), "otel_replay_risk": "write"}

    @tool
    def transfer_funds(account: str, amount: int) -> str:
        """Move money between accounts."""
        return "moved"

    def call(t: Any, n: int) -> Any:
        asked = AIMessage(content="", tool_calls=[{"name": t.name, "args": {}, "id": f"c{n}"}])
        return t.invoke({"type": "tool_call", "name": t.name, "args": {"state": {"messages": [asked]}}, "id": f"c{n}"})

    @orp.agent("lc-handoffs")
    def route() -> str:
        assert call(to_flights, 1).goto == "flight_assistant"
        assert call(to_bob, 2).goto == "Bob"
        assert call(declared, 3).goto == "payments"
        return str(transfer_funds.invoke({"account": "A1", "amount": 5}))

    assert route() == "moved"
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="lc-handoffs")
        steps = store.load_run(summary.trace_id).steps
    assert [(s.kind, s.name) for s in steps] == [
        ("handoff", "transfer_to_flight_assistant"),
        ("handoff", "transfer_to_bob"),
        ("handoff", "transfer_to_payments"),
        ("tool", "transfer_funds"),
    ]
    assert [s.attributes.get(semconv.HANDOFF_TO) for s in steps] == ["flight_assistant", "Bob", "payments", None]
    assert [s.attributes.get(semconv.TOOL_RISK) for s in steps] == [None, None, "write", "high"]
    assert [s.snapshots["tool"]["risk"] for s in steps] == [None, None, "write", "high"]
    assert instrumentor.risk_of(to_bob) is None


def test_suppressed_instrumentation_records_nothing(lc: dict[str, Any]) -> None:
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    @orp.agent("lc-suppressed")
    def quiet() -> str:
        with suppress_instrumentation():
            return str(lookup_order.invoke({"order_id": "Q1"})["order_id"])

    assert quiet() == "Q1"
    assert CALLS["lookup_order"] == 1
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="lc-suppressed")
        assert store.load_run(summary.trace_id).steps == ()


def test_recording_failures_never_reach_the_agent(lc: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import otel_replay.instrumentation._langchain_models as models
    import otel_replay.instrumentation.langchain as module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("recorder is broken")

    # each patched where it is called: the model and retriever wrappers, the tool wrappers
    monkeypatch.setattr(models, "begin_model_call", broken)
    monkeypatch.setattr(module, "begin_tool_call", broken)
    monkeypatch.setattr(models, "begin_retrieval_call", broken)
    monkeypatch.setattr(models, "model_request", broken)
    assert billing_agent("E5") == "Done: settled 42 on acc-7"
    assert CALLS == {"retriever": 1, "model": 3, "lookup_order": 1, "settle_account": 1}


def test_tool_errors_are_recorded_reraised_unchanged_and_replayed(lc: dict[str, Any]) -> None:
    with pytest.raises(LedgerError, match="ledger locked for acc-1") as raised:
        ledger_agent("acc-1")
    assert type(raised.value) is LedgerError
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent="lc-ledger")
        run = store.load_run(summary.trace_id)
    assert run.steps[0].status == "error"
    assert run.steps[0].attributes[semconv.ERROR_TYPE] == "test_instrument_langchain.LedgerError"
    CALLS.clear()
    result = orp.replay(summary.trace_id, mode="mock")
    assert result.outcome == "matched", result.divergences
    assert result.replay is not None and result.replay.steps[0].status == "error"
    assert CALLS == {}


def test_orp_instrument_passes_the_tool_risks(home: Path) -> None:
    from langchain_core.tools import BaseTool

    assert orp.instrument("langchain", tool_risks={"lookup_order": "write"}) == ["langchain"]
    try:
        assert hasattr(BaseTool.run, "__wrapped__")
        assert LangChainInstrumentor().risk_of(lookup_order) == "write"  # the singleton keeps its map
    finally:
        assert orp.uninstrument("langchain") == ["langchain"]
    assert not hasattr(BaseTool.run, "__wrapped__")


def test_uninstrument_restores_every_method(lc: dict[str, Any]) -> None:
    from langchain_core.retrievers import BaseRetriever as Retriever
    from langchain_core.tools import BaseTool
    from langgraph.pregel import Pregel

    targets = [
        (BaseChatModel, "_generate_with_cache"),
        (BaseChatModel, "_agenerate_with_cache"),
        (BaseChatModel, "stream"),
        (BaseChatModel, "astream"),
        (BaseTool, "run"),
        (BaseTool, "arun"),
        (Retriever, "invoke"),
        (Retriever, "ainvoke"),
        (Pregel, "invoke"),
        (Pregel, "stream"),
    ]
    assert all(hasattr(getattr(cls, name), "__wrapped__") for cls, name in targets)
    lc["instrumentor"].uninstrument()
    try:
        assert not any(hasattr(getattr(cls, name), "__wrapped__") for cls, name in targets)
        billing_agent("F6")
        orp.flush()
        with Store.open() as store:
            (summary,) = store.runs(agent="lc-billing")
            assert store.load_run(summary.trace_id).steps == ()
    finally:
        lc["instrumentor"].instrument()
