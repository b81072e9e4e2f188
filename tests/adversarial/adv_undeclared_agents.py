"""Agents for tests/adversarial/test_adv_undeclared_tools.py: one write tool, ``book_table``, declared with
``@orp.tool(risk="write")`` when the run is recorded, then the decorator line removed from the code, as a
developer would.

Each agent is a module written into a project folder the test owns (``write_agent``), so the code a replay
imports, and the source a dry replay reads, really lose the decorator. The agents follow their framework's own
docs: Pydantic AI (``Agent('openai:...')`` and ``@agent.tool_plain``), LangChain (``@tool``, ``bind_tools`` and
the tool-calling loop of its how-to), the OpenAI Agents SDK (``@function_tool`` and ``Runner.run_sync``) and a
smolagents ``CodeAgent`` (``@tool``; its model writes code that calls the tool, see ``CODE_ANSWER``), each on the
OpenAI SDK instrumented by ``orp.instrument("openai")``: the decorator is what makes the tool a step.
``book_table`` appends a line to the file named by ``ADV_BOOKINGS``, so the test counts real bookings on disk.
"""

from __future__ import annotations

from pathlib import Path

BOOKINGS_ENV = "ADV_BOOKINGS"
DECORATOR = '@orp.tool(risk="write")'

_TOOL = '''
def book_table(restaurant: str) -> str:
    """Book a table for two at a restaurant tonight."""
    with open(os.environ["ADV_BOOKINGS"], "a", encoding="utf-8") as bookings:
        bookings.write(f"booked {restaurant}\\n")
    return f"booked a table at {restaurant}"
'''

_HEAD = '''"""A booking agent (written by tests/adversarial/adv_undeclared_agents.py)."""

import os
import sys

import otel_replay as orp

orp.instrument("openai")
'''

SOURCES = {
    "pydantic_ai": _HEAD
    + """
from pydantic_ai import Agent

agent = Agent("openai:gpt-4o-mini", instructions="Book what the user asks for with the book_table tool.")


@agent.tool_plain
{decorator}"""
    + _TOOL
    + """

@orp.agent("booking-pydantic-ai")
def run(question: str) -> str:
    return agent.run_sync(question).output
""",
    "langchain": _HEAD
    + """
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


@tool
{decorator}"""
    + _TOOL
    + """

llm = ChatOpenAI(model="gpt-4o-mini").bind_tools([book_table])


@orp.agent("booking-langchain")
def run(question: str) -> str:
    messages = [HumanMessage(question)]
    answer = llm.invoke(messages)
    messages.append(answer)
    for call in answer.tool_calls:
        messages.append(book_table.invoke(call))
    return str(llm.invoke(messages).content)
""",
    "openai_agents": _HEAD
    + """
from agents import Agent, Runner, function_tool, set_tracing_disabled

set_tracing_disabled(True)


@function_tool
{decorator}"""
    + _TOOL
    + """

agent = Agent(name="Booker", instructions="Book what the user asks for with the book_table tool.", tools=[book_table])


@orp.agent("booking-agents-sdk")
def run(question: str) -> str:
    return str(Runner.run_sync(agent, question).final_output)
""",
    "smolagents": _HEAD
    + """
from smolagents import CodeAgent, OpenAIServerModel, tool


@tool
{decorator}
def book_table(restaurant: str) -> str:
    \"\"\"Book a table for two at a restaurant tonight.

    Args:
        restaurant: The name of the restaurant.
    \"\"\"
    with open(os.environ["ADV_BOOKINGS"], "a", encoding="utf-8") as bookings:
        bookings.write(f"booked {restaurant}\\n")
    return f"booked a table at {restaurant}"


model = OpenAIServerModel(
    model_id="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"]
)
agent = CodeAgent(tools=[book_table], model=model, max_steps=2, verbosity_level=0)


@orp.agent("booking-smolagents")
def run(question: str) -> str:
    return str(agent.run(question))
""",
}

CODE_ANSWER = (
    'Thought: I book the table.\n<code>\nbooked = book_table(restaurant="Chez Paul")\nfinal_answer(booked)\n</code>'
)
"""What the fake server answers the smolagents ``CodeAgent`` (``FakeLLMServer.chat_texts``): model-written code
that calls ``book_table``; its result goes back as the run's final answer, not as a tool call's result."""

_TAIL = """

if __name__ == "__main__":
    print(run(sys.argv[1]))
"""

RECORD = '''"""Record one run of an agent module (its entrypoint is then module:run, importable by a replay)."""

import importlib
import sys

print(importlib.import_module(sys.argv[1]).run(sys.argv[2]))
'''


def write_agent(folder: Path, framework: str, *, decorated: bool) -> str:
    """Write the ``framework`` agent into ``folder`` as ``booking_<framework>.py``, with the decorator line or
    without it (removed, the line gone); returns the module name."""
    module = f"booking_{framework}"
    text = SOURCES[framework].replace("{decorator}\n", f"{DECORATOR}\n" if decorated else "") + _TAIL
    (folder / f"{module}.py").write_text(text, encoding="utf-8")
    (folder / "record.py").write_text(RECORD, encoding="utf-8")
    return module
