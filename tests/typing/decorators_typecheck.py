"""Checked by mypy (``mypy`` runs on ``tests/typing``), never run: the public decorators keep the decorated
function's signature, in the bare form (``@orp.tool``) and the called form (``@orp.tool(risk="write")``), for
sync and async functions. A decorator typed ``Any`` again fails the ``assert_type`` lines below; a call with a
wrong argument fails the lines marked ``type: ignore[...]`` (mypy reports an unused ignore)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from typing_extensions import assert_type

import otel_replay as orp
from otel_replay.recording import AgentBlock


@orp.agent
def plain_agent(question: str, *, depth: int = 1) -> list[str]:
    return [question] * depth


@orp.agent("named-agent", config={"temperature": 0})
async def named_agent(question: str) -> str:
    return question


@orp.tool
def bare_tool(city: str) -> dict[str, float]:
    return {city: 1.0}


@orp.tool(risk="write", schema_version="2")
def called_tool(order_id: int, amount: float = 0.0) -> bool:
    return amount >= 0 and order_id > 0


@orp.tool()
async def async_tool(path: str) -> bytes:
    return path.encode()


@orp.model
def bare_model(prompt: str) -> str:
    return prompt


@orp.model("chat", provider="openai", model="gpt-4o-mini")
async def called_model(messages: list[dict[str, str]]) -> dict[str, Any]:
    return {"messages": messages}


@orp.retriever
def bare_retriever(query: str, top_k: int = 3) -> list[str]:
    return [query] * top_k


@orp.retriever("kb")
def named_retriever(query: str) -> list[str]:
    return [query]


sync_agent: Callable[[str], list[str]] = plain_agent
assert_type(plain_agent("q", depth=2), list[str])
assert_type(bare_tool("Paris"), dict[str, float])
assert_type(called_tool(1, amount=2.5), bool)
assert_type(bare_model("hi"), str)
assert_type(bare_retriever("q", top_k=1), list[str])
assert_type(named_retriever("q"), list[str])
async_agent: Callable[[str], Coroutine[Any, Any, str]] = named_agent


async def awaited() -> None:
    assert_type(await named_agent("q"), str)
    assert_type(await async_tool("a"), bytes)
    assert_type(await called_model([{"role": "user"}]), dict[str, Any])


# the with-form is a context manager and also a decorator
assert_type(orp.agent("sql-agent", input="question"), AgentBlock)
with orp.agent("sql-agent", input="question") as block:
    assert_type(block, AgentBlock)

# the parameters are checked, not erased
bare_tool(3)  # type: ignore[arg-type]
called_tool("1")  # type: ignore[arg-type]
plain_agent("q", 2)  # type: ignore[call-arg]
named_retriever("q", top_k=2)  # type: ignore[call-arg]
bare_model()  # type: ignore[call-arg]

# a tool's risk is one of the declared levels, as a literal or a member of orp.Risk
orp.tool("charge", risk="high")
orp.tool("charge", risk=orp.Risk.WRITE)
orp.tool("charge", risk="dangerous")  # type: ignore[call-overload]
