"""LangChain's tool-calling agent run by ``AgentExecutor``, as in LangChain's agent docs, on ``ChatOpenAI``.

Recorded with one line (``orp.instrument()``), or with no otel-replay line at all under
``opentelemetry-instrument python rw_agent_executor_agent.py`` (``RW_ZERO_CODE=1`` leaves the line out). The
first tool offered, ``send_postcard``, has a real side effect: it appends a line to ``$RW_OUTBOX/postcards.txt``;
``get_weather`` only reads. ``RW_SYSTEM_PROMPT`` and ``RW_TOOL_NOTE`` change the code as a developer would (the
prompt; what the model is shown of a tool's result), for the divergence tests.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":
    orp.instrument()

from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
from langchain_classic.agents.format_scratchpad.tools import format_to_tool_messages
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

SYSTEM_PROMPT = os.environ.get("RW_SYSTEM_PROMPT", "You are a helpful travel assistant.")


@tool
def send_postcard(city: str) -> str:
    """Send a postcard from the given city."""
    with open(Path(os.environ["RW_OUTBOX"]) / "postcards.txt", "a") as outbox:
        outbox.write(f"postcard from {city}\n")
    return f"postcard sent from {city}"


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return "It's 60 degrees and foggy." if city.lower() in ("sf", "san francisco") else "It's 90 degrees and sunny."


def shown_results(intermediate_steps):
    """What the model is shown of the tools' results (``RW_TOOL_NOTE`` appends a note to each)."""
    note = os.environ.get("RW_TOOL_NOTE")
    if note:
        intermediate_steps = [(action, f"{observation} ({note})") for action, observation in intermediate_steps]
    return format_to_tool_messages(intermediate_steps)


tools = [send_postcard, get_weather]
prompt = ChatPromptTemplate.from_messages(
    [
        ("system", SYSTEM_PROMPT),
        ("placeholder", "{chat_history}"),
        ("human", "{input}"),
        ("placeholder", "{agent_scratchpad}"),
    ]
)
model = ChatOpenAI(model="gpt-4o-mini", temperature=0)
agent = create_tool_calling_agent(model, tools, prompt, message_formatter=shown_results)
agent_executor = AgentExecutor(agent=agent, tools=tools)


if __name__ == "__main__":
    question = sys.argv[1] if len(sys.argv) > 1 else "send a postcard from Paris"
    print(agent_executor.invoke({"input": question})["output"])
