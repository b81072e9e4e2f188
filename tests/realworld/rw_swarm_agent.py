"""The langgraph-swarm README's multi-agent graph: Alice (an addition expert) and Bob (who speaks like a pirate),
``create_react_agent`` each, with handoff tools to one another (``create_handoff_tool``), in a ``create_swarm``
with a checkpointer, on ``ChatOpenAI``. One change to the README: Bob has a tool with a real side effect,
``send_postcard`` (a ``write`` tool, declared in the one line), which appends a line to
``$RW_OUTBOX/postcards.txt``.

Recorded with one line, ``orp.instrument(tool_risks=...)``; ``RW_ZERO_CODE=1`` leaves it out.
``RW_BOB_PROMPT`` changes Bob's prompt, as a developer would. Several questions as arguments are the turns of one
conversation (one thread of the checkpointer), recorded inside ``orp.identity(session=$RW_SESSION)``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":  # 1: under opentelemetry-instrument, with no otel-replay line
    orp.instrument(tool_risks={"send_postcard": "write"})

from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph_swarm import create_handoff_tool, create_swarm

model = ChatOpenAI(model="gpt-4o")


def add(a: int, b: int) -> int:
    """Add two numbers"""
    return a + b


def send_postcard(text: str) -> str:
    """Send a postcard"""
    with open(Path(os.environ["RW_OUTBOX"]) / "postcards.txt", "a") as outbox:
        outbox.write(text + "\n")
    return f"postcard sent: {text}"


alice = create_react_agent(
    model,
    [add, create_handoff_tool(agent_name="Bob")],
    prompt="You are Alice, an addition expert.",
    name="Alice",
)

bob = create_react_agent(
    model,
    [send_postcard, create_handoff_tool(agent_name="Alice", description="Transfer to Alice, she can help with math")],
    prompt=os.environ.get("RW_BOB_PROMPT", "You are Bob, you speak like a pirate."),
    name="Bob",
)

checkpointer = InMemorySaver()
workflow = create_swarm([alice, bob], default_active_agent="Alice")
app = workflow.compile(checkpointer=checkpointer)


def ask(question: str, thread_id: str = "1") -> str:
    """One turn of the conversation (the README's ``app.invoke(..., config)``); the answer's text."""
    config = {"configurable": {"thread_id": thread_id}}
    return str(app.invoke({"messages": [{"role": "user", "content": question}]}, config)["messages"][-1].content)


if __name__ == "__main__":
    if len(sys.argv) > 2:  # a conversation: one turn per argument, one session, one checkpointer thread
        with orp.identity(session=os.environ.get("RW_SESSION", "conversation-1")):
            for question in sys.argv[1:]:
                print(ask(question))
    else:
        print(ask(sys.argv[1] if len(sys.argv) > 1 else "i'd like to speak to Bob"))
