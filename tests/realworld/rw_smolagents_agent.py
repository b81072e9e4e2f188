"""A smolagents ``CodeAgent`` as smolagents' guided tour writes one: a ``@tool`` function and a ``Tool`` subclass,
an ``OpenAIServerModel`` pointed at an OpenAI-compatible server, the default (local) Python executor.

Recorded with one line (``orp.instrument("smolagents")``), or with no otel-replay line at all under
``opentelemetry-instrument python rw_smolagents_agent.py`` (``RW_ZERO_CODE=1`` leaves the line out). The model
writes Python code that calls the tools; ``send_message`` has a real side effect (it appends a line to
``$RW_OUTBOX/messages.txt``). ``main(task)`` is what a replay calls (``--app rw_smolagents_agent:main``): it
returns the final answer.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":
    orp.instrument("smolagents")

from smolagents import CodeAgent, OpenAIServerModel, Tool, tool


@tool
def send_message(to: str, text: str) -> str:
    """Sends a text message to a person.

    Args:
        to: The name of the person to send the message to.
        text: The text of the message.
    """
    with open(Path(os.environ["RW_OUTBOX"]) / "messages.txt", "a") as outbox:
        outbox.write(f"to {to}: {text}\n")
    return f"message sent to {to}"


class WeatherTool(Tool):
    name = "get_weather"
    description = "Returns today's weather in a city."
    inputs = {"city": {"type": "string", "description": "The city to get the weather for."}}  # noqa: RUF012
    output_type = "string"

    def forward(self, city: str) -> str:
        return f"sunny in {city}, 21C"


model = OpenAIServerModel(
    model_id="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"]
)
agent = CodeAgent(tools=[send_message, WeatherTool()], model=model, max_steps=3, verbosity_level=0)


def main(task: str = "Text Alice the weather in Paris.") -> str:
    return str(agent.run(task))


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
