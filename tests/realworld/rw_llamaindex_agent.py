"""LlamaIndex's ``FunctionAgent`` example (its docs' "Agents" page): plain Python functions as tools, an OpenAI
LLM, ``agent.run(user_msg=...)`` streamed with ``handler.stream_events()`` and then awaited.

Recorded with one line (``orp.instrument("llamaindex")``; ``RW_ZERO_CODE=1`` leaves it out, for
``opentelemetry-instrument python rw_llamaindex_agent.py``). Two tools, no decorator: ``send_forecast``, offered
first, has a real side effect (it appends a line to ``$RW_OUTBOX/forecasts.txt``); ``get_weather`` only reads.
The LLM is pointed at ``$OPENAI_BASE_URL`` (the fake server in the tests). ``main(input)`` is what a replay calls
(``--app rw_llamaindex_agent:main``): it returns the agent's final text; the script prints it.

``RW_DECORATE=1`` is the decorated setup of the same program: ``send_forecast`` is an ``@orp.tool(risk="write")``,
``get_weather`` an ``@orp.tool(risk="read")``, and ``main`` an ``@orp.agent`` (the run begins there, and a replay
finds it without ``--app``). ``RW_TEMP_EFFECT=1``: ``send_forecast`` also appends its line to ``forecasts.txt`` in
the temp folder (``tempfile.gettempdir()``), a file a mock replay's guard would let it write.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":
    orp.instrument("llamaindex")

from llama_index.core.agent.workflow import AgentStream, FunctionAgent, ToolCallResult
from llama_index.llms.openai import OpenAI


def send_forecast(city: str) -> str:
    """Send today's forecast for a city to its subscribers."""
    with open(Path(os.environ["RW_OUTBOX"]) / "forecasts.txt", "a") as outbox:
        outbox.write(f"forecast for {city}\n")
    if os.environ.get("RW_TEMP_EFFECT") == "1":
        with open(Path(tempfile.gettempdir()) / "forecasts.txt", "a") as note:
            note.write(f"forecast for {city}\n")
    return f"forecast sent for {city}"


def get_weather(city: str) -> str:
    """Useful for getting the weather for a given city."""
    return f"The weather in {city} is sunny, 14-20C."


DECORATED = os.environ.get("RW_DECORATE") == "1"
if DECORATED:
    send_forecast = orp.tool(risk="write")(send_forecast)
    get_weather = orp.tool(risk="read")(get_weather)

agent = FunctionAgent(
    tools=[send_forecast, get_weather],
    llm=OpenAI(model="gpt-4o-mini", api_base=os.environ.get("OPENAI_BASE_URL")),
    system_prompt=os.environ.get("RW_INSTRUCTIONS", "You are a helpful assistant that can send weather forecasts."),
)


async def main(input: str = "Send the forecast for Tokyo.") -> str:  # noqa: A002 - the name a replay passes
    handler = agent.run(user_msg=input)
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            print(f"[tool] {event.tool_name}: {event.tool_output}", file=sys.stderr)
        elif isinstance(event, AgentStream):
            pass  # the streamed text, token by token
    response = await handler
    return str(response)


if DECORATED:
    main = orp.agent("weather-forecaster")(main)


if __name__ == "__main__":
    print(asyncio.run(main(*sys.argv[1:2])))
