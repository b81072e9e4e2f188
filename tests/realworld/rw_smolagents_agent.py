"""A smolagents ``CodeAgent`` as smolagents' guided tour writes one: a ``@tool`` function and a ``Tool`` subclass,
an ``OpenAIServerModel`` pointed at an OpenAI-compatible server, the default (local) Python executor.

Recorded with one line (``orp.instrument("smolagents")``), or with no otel-replay line at all under
``opentelemetry-instrument python rw_smolagents_agent.py`` (``RW_ZERO_CODE=1`` leaves the line out). The model
writes Python code that calls the tools; ``send_message`` has a real side effect (it appends a line to
``$RW_OUTBOX/messages.txt``). ``main(task)`` is what a replay calls (``--app rw_smolagents_agent:main``): it
returns the final answer.

``RW_DECORATE=1`` is the decorated setup of the same program: ``send_message`` is an ``@orp.tool(risk="write")``
before smolagents' ``tool()`` makes it a tool, ``WeatherTool.forward`` an
``@orp.tool("get_weather", risk="read")``, and ``main`` an ``@orp.agent`` (the run begins there, and a replay
finds it without ``--app``). ``RW_TEMP_EFFECT=1``: ``send_message`` also appends its line to ``messages.txt`` in
the temp folder (``tempfile.gettempdir()``), a file a mock replay's guard would let it write.
``RW_INSTRUCTIONS`` stands for an edit of the prompt: the agent's ``instructions=``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":
    orp.instrument("smolagents")

from smolagents import CodeAgent, OpenAIServerModel, Tool, tool

DECORATED = os.environ.get("RW_DECORATE") == "1"


def send_message(to: str, text: str) -> str:
    """Sends a text message to a person.

    Args:
        to: The name of the person to send the message to.
        text: The text of the message.
    """
    with open(Path(os.environ["RW_OUTBOX"]) / "messages.txt", "a") as outbox:
        outbox.write(f"to {to}: {text}\n")
    if os.environ.get("RW_TEMP_EFFECT") == "1":
        with open(Path(tempfile.gettempdir()) / "messages.txt", "a") as note:
            note.write(f"to {to}: {text}\n")
    return f"message sent to {to}"


if DECORATED:  # @tool over @orp.tool(risk="write")
    send_message = orp.tool(risk="write")(send_message)
send_message = tool(send_message)


class WeatherTool(Tool):
    name = "get_weather"
    description = "Returns today's weather in a city."
    inputs = {"city": {"type": "string", "description": "The city to get the weather for."}}  # noqa: RUF012
    output_type = "string"

    def forward(self, city: str) -> str:
        return f"sunny in {city}, 21C"


if DECORATED:  # the forward of a Tool subclass as an @orp.tool(risk="read")
    WeatherTool.forward = orp.tool("get_weather", risk="read")(WeatherTool.forward)  # type: ignore[method-assign]


model = OpenAIServerModel(
    model_id="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"]
)
agent = CodeAgent(
    tools=[send_message, WeatherTool()],
    model=model,
    max_steps=3,
    verbosity_level=0,
    instructions=os.environ.get("RW_INSTRUCTIONS"),  # a test's edit of the prompt; none by default
)


def main(task: str = "Text Alice the weather in Paris.") -> str:
    return str(agent.run(task))


if DECORATED:
    main = orp.agent("messenger")(main)


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
