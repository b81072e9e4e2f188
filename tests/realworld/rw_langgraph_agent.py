"""LangGraph's prebuilt ReAct agent, as in the ``langgraph.prebuilt`` README, on ``ChatOpenAI``.

Recorded with one line (``orp.instrument()``), or with no otel-replay line at all under
``opentelemetry-instrument python rw_langgraph_agent.py`` (``RW_ZERO_CODE=1`` leaves the line out). The first
tool offered, ``send_postcard``, has a real side effect: it appends a line to ``$RW_OUTBOX/postcards.txt``;
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

from langchain_core.messages import ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import ToolNode, create_react_agent

SYSTEM_PROMPT = os.environ.get("RW_SYSTEM_PROMPT", "You are a helpful travel assistant.")


def send_postcard(city: str) -> str:
    """Send a postcard from the given city."""
    with open(Path(os.environ["RW_OUTBOX"]) / "postcards.txt", "a") as outbox:
        outbox.write(f"postcard from {city}\n")
    return f"postcard sent from {city}"


def get_weather(city: str) -> str:
    """Call to get the current weather."""
    if city.lower() in ("sf", "san francisco"):
        return "It's 60 degrees and foggy."
    return "It's 90 degrees and sunny."


def shown_result(request, execute):
    """What the model is shown of a tool's result (``RW_TOOL_NOTE`` appends a note to it)."""
    result = execute(request)
    note = os.environ.get("RW_TOOL_NOTE")
    if note and isinstance(result, ToolMessage):
        result = result.model_copy(update={"content": f"{result.content} ({note})"})
    return result


model = ChatOpenAI(model="gpt-4o-mini", temperature=0)
agent = create_react_agent(
    model, tools=ToolNode([send_postcard, get_weather], wrap_tool_call=shown_result), prompt=SYSTEM_PROMPT
)


if __name__ == "__main__":
    question = sys.argv[1] if len(sys.argv) > 1 else "send a postcard from Paris"
    result = agent.invoke({"messages": [{"role": "user", "content": question}]})
    print(result["messages"][-1].content)
