"""``replay_tool`` on LangChain tools recorded by the LangChain instrumentation: found by name in the current
code, called through the firewall, and never imported from a name the recording holds unless the entrypoint
rule allows it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.tools import tool

import otel_replay as orp
from otel_replay.instrumentation.langchain import LangChainInstrumentor
from otel_replay.recording import begin_tool_call, end_call
from otel_replay.replay.engine import ReplayRefused
from otel_replay.storage.store import Store

CALLS: list[str] = []


@tool
def transfer_funds(account: str) -> str:
    """Move money (a high-risk name)."""
    CALLS.append(account)
    return f"moved from {account}"


@tool
async def refund_payment(account: str) -> str:
    """Give money back (an async tool with a high-risk name)."""
    CALLS.append(f"refund {account}")
    return f"refunded {account}"


TOOLS = [transfer_funds, refund_payment]


@orp.agent("lc-tools")
def tools_agent(account: str) -> str:
    """Calls the LangChain tool as an agent would."""
    return str(transfer_funds.invoke({"account": account}))


@orp.agent("lc-async-tools")
def async_tools_agent(account: str) -> str:
    """Calls the async LangChain tool as an async agent would."""
    return str(asyncio.run(refund_payment.ainvoke({"account": account})))


@orp.agent("lc-hostile")
def hostile_agent() -> None:
    """A tool step that claims the LangChain instrumentation and names a standard-library function."""
    call = begin_tool_call("transfer_funds", {"account": "a"}, function="antigravity:fly", instrumentation="langchain")
    end_call(call, result="ok")


@pytest.fixture
def instrumented(home: Path) -> Iterator[None]:
    """The LangChain instrumentation on."""
    CALLS.clear()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument()
    try:
        yield
    finally:
        instrumentor.uninstrument()


def _trace(agent: str) -> str:
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return summary.trace_id


def test_replay_tool_finds_the_langchain_tool_in_the_entrypoint_module(instrumented: None) -> None:
    tools_agent("acc-1")
    assert CALLS == ["acc-1"]
    trace_id = _trace("lc-tools")
    CALLS.clear()
    mock = orp.replay_tool(trace_id, 0, mode="mock")
    assert (mock.tool, mock.outcome, mock.result) == ("transfer_funds", "matched", "moved from acc-1")
    refused = orp.replay_tool(trace_id, 0, mode="live", reason="check")
    assert refused.outcome == "refused" and CALLS == []
    live = orp.replay_tool(trace_id, 0, mode="live", reason="check", approve=True, app=f"{__name__}:TOOLS")
    assert live.outcome == "matched" and CALLS == ["acc-1"]


def test_replay_tool_calls_an_async_langchain_tool_through_its_coroutine(instrumented: None) -> None:
    async_tools_agent("acc-3")
    assert CALLS == ["refund acc-3"]
    trace_id = _trace("lc-async-tools")
    CALLS.clear()
    mock = orp.replay_tool(trace_id, 0, mode="mock")
    assert (mock.tool, mock.outcome, mock.result) == ("refund_payment", "matched", "refunded acc-3")
    assert CALLS == []
    refused = orp.replay_tool(trace_id, 0, mode="live", reason="check")
    assert refused.outcome == "refused" and CALLS == []
    live = orp.replay_tool(trace_id, 0, mode="live", reason="check", approve=True, args={"account": "acc-4"})
    assert (live.outcome, live.result) == ("diverged", "refunded acc-4") and CALLS == ["refund acc-4"]


def test_a_missing_tool_is_refused_with_what_to_pass(instrumented: None) -> None:
    tools_agent("acc-2")
    trace_id = _trace("lc-tools")
    with pytest.raises(ReplayRefused, match="no LangChain tool named 'transfer_funds' was found in fake_llm_servers"):
        orp.replay_tool(trace_id, 0, mode="mock", app="fake_llm_servers")
    with pytest.raises(ReplayRefused, match="module 'json' was not run: 'json' is part of the Python standard"):
        orp.replay_tool(trace_id, 0, mode="mock", app="json")


def test_a_recorded_standard_library_function_is_never_imported(instrumented: None) -> None:
    hostile_agent()
    assert "antigravity" not in sys.modules
    with pytest.raises(ReplayRefused, match="standard library"):
        orp.replay_tool(_trace("lc-hostile"), 0, mode="mock")
    assert "antigravity" not in sys.modules
