"""The OpenAI Agents SDK's ``examples/basic/tools.py``: a ``get_weather`` function tool and ``Runner.run``.

Recorded with one line (``orp.instrument()``), or with no otel-replay line at all under
``opentelemetry-instrument python rw_openai_agents_agent.py`` (``RW_ZERO_CODE=1`` leaves the line out). One tool
is added, offered first: ``send_forecast`` has a real side effect (it appends a line to
``$RW_OUTBOX/forecasts.txt``). ``RW_STREAM=1`` runs the agent with ``Runner.run_streamed`` instead, consuming its
events. ``RW_INSTRUCTIONS`` changes the agent's instructions as a developer would, for the divergence tests.
``main(input)`` is what a replay calls (``--app rw_openai_agents_agent:main``): it returns the final output (the
upstream example prints it inside ``main``; here the script prints it, so a replay prints nothing).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":
    orp.instrument()

from agents import Agent, Runner, function_tool
from pydantic import BaseModel, Field

INSTRUCTIONS = os.environ.get("RW_INSTRUCTIONS", "You are a helpful agent.")


class Weather(BaseModel):
    city: str = Field(description="The city name")
    temperature_range: str = Field(description="The temperature range in Celsius")
    conditions: str = Field(description="The weather conditions")


@function_tool
def send_forecast(city: Annotated[str, "The city to send the forecast for"]) -> str:
    """Send today's forecast for a city to its subscribers."""
    with open(Path(os.environ["RW_OUTBOX"]) / "forecasts.txt", "a") as outbox:
        outbox.write(f"forecast for {city}\n")
    return f"forecast sent for {city}"


@function_tool
def get_weather(city: Annotated[str, "The city to get the weather for"]) -> Weather:
    """Get the current weather information for a specified city."""
    print("[debug] get_weather called")
    return Weather(city=city, temperature_range="14-20C", conditions="Sunny with wind.")


agent = Agent(
    name="Hello world",
    instructions=INSTRUCTIONS,
    tools=[send_forecast, get_weather],
)


async def main(input: str = "What's the weather in Tokyo?") -> str:  # noqa: A002 - Runner.run's name for it
    if os.environ.get("RW_STREAM") == "1":
        streamed = Runner.run_streamed(agent, input=input)
        async for _event in streamed.stream_events():
            pass
        output = streamed.final_output
    else:
        result = await Runner.run(agent, input=input)
        output = result.final_output
    return output


if __name__ == "__main__":
    print(asyncio.run(main(*sys.argv[1:2])))
