"""A Pydantic AI agent as its docs write one (``Agent("openai:...")``, ``@agent.tool_plain`` tools, ``run_sync``),
recorded with one line: ``orp.instrument()`` turns on every installed SDK, Pydantic AI included; its tools carry
no otel-replay decorator. ``RW_ZERO_CODE=1`` leaves the line out (``opentelemetry-instrument``).

``book_table`` has a real side effect (a line appended to ``$RW_OUTBOX/bookings.txt``) and declares its risk in
the tool's metadata, as the docs show; ``list_tables`` only reads. ``RW_INSTRUCTIONS`` changes the agent's
instructions, as a developer would; ``RW_PYDANTIC_OTEL=1`` turns on Pydantic AI's own OpenTelemetry
instrumentation (``Agent.instrument_all()``). ``RW_SHAPE=run_stream`` or ``iter`` runs the agent in those forms
(``ask_stream``, ``ask_iter``: what a replay of those runs calls) instead of ``run_sync``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":
    orp.instrument()

from pydantic_ai import Agent

if os.environ.get("RW_PYDANTIC_OTEL") == "1":  # Pydantic AI's own OpenTelemetry spans, on the global provider
    Agent.instrument_all()

agent = Agent(
    "openai:gpt-4o-mini",
    name="restaurant-desk",
    instructions=os.environ.get("RW_INSTRUCTIONS", "Book a table with the book_table tool when asked."),
)


@agent.tool_plain(metadata={"otel_replay_risk": "write"})
def book_table(name: str, seats: int) -> str:
    """Book a table for ``seats`` people under ``name``."""
    with open(Path(os.environ["RW_OUTBOX"]) / "bookings.txt", "a") as outbox:
        outbox.write(f"{name}: {seats}\n")
    return f"booked a table for {seats} under {name}"


@agent.tool_plain
def list_tables() -> list[str]:
    """The free tables."""
    return ["t1", "t4"]


async def ask_stream(user_prompt: str) -> str:
    """The docs' streaming form: ``run_stream``, the text consumed as it streams."""
    async with agent.run_stream(user_prompt) as response:
        return "".join([part async for part in response.stream_text(delta=True)])


async def ask_iter(user_prompt: str) -> str:
    """The docs' graph-iteration form: ``iter``, every node of the run visited."""
    async with agent.iter(user_prompt) as agent_run:
        async for _node in agent_run:
            pass
    assert agent_run.result is not None
    return str(agent_run.result.output)


if __name__ == "__main__":
    prompt = sys.argv[1] if len(sys.argv) > 1 else "a table for 2 under Ada, please"
    shape = os.environ.get("RW_SHAPE", "run_sync")
    if shape == "run_sync":
        print(agent.run_sync(prompt).output)
    else:
        import asyncio

        print(asyncio.run(ask_stream(prompt) if shape == "run_stream" else ask_iter(prompt)))
