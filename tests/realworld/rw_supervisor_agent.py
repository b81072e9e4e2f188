"""The langgraph-supervisor README's example: a supervisor (``create_supervisor``) over a flight and a hotel
booking assistant (``create_react_agent``), all on ``ChatOpenAI``.

Recorded with one line, ``orp.instrument(tool_risks=...)``, which also declares the two booking tools ``write``
(the docs' way for plain functions); ``RW_ZERO_CODE=1`` leaves the line out. Each booking tool has a real side
effect: it appends a line to ``$RW_OUTBOX/bookings.txt``. ``RW_SUPERVISOR_PROMPT`` changes the supervisor's
prompt, as a developer would.
"""

from __future__ import annotations

import os
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":  # 1: under opentelemetry-instrument, with no otel-replay line
    orp.instrument(tool_risks={"book_flight": "write", "book_hotel": "write"})

from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from langgraph_supervisor import create_supervisor

model = ChatOpenAI(model="gpt-4o")


def _booked(line: str) -> str:
    with open(Path(os.environ["RW_OUTBOX"]) / "bookings.txt", "a") as outbox:
        outbox.write(line + "\n")
    return line


def book_hotel(hotel_name: str):
    """Book a hotel"""
    return _booked(f"Successfully booked a stay at {hotel_name}.")


def book_flight(from_airport: str, to_airport: str):
    """Book a flight"""
    return _booked(f"Successfully booked a flight from {from_airport} to {to_airport}.")


flight_assistant = create_react_agent(
    model=model, tools=[book_flight], prompt="You are a flight booking assistant", name="flight_assistant"
)
hotel_assistant = create_react_agent(
    model=model, tools=[book_hotel], prompt="You are a hotel booking assistant", name="hotel_assistant"
)
supervisor = create_supervisor(
    agents=[flight_assistant, hotel_assistant],
    model=model,
    prompt=os.environ.get(
        "RW_SUPERVISOR_PROMPT",
        "You manage a hotel booking assistant and a flight booking assistant. Assign work to them.",
    ),
).compile()


if __name__ == "__main__":
    result = supervisor.invoke(
        {"messages": [{"role": "user", "content": "book a flight from BOS to JFK and a stay at McKittrick Hotel"}]}
    )
    print(result["messages"][-1].content)
