"""Agents whose runs carry fresh ids in every answer, for ``test_volatile_ids.py``.

Each drives a real SDK (``openai``, ``anthropic``, ``langchain_openai.ChatOpenAI`` in a LangGraph
``create_react_agent``) against :class:`fake_llm_servers.FakeLLMServer` with ``volatile_ids=True``
(``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` point at it), so every answer has new completion, message and
tool-call ids, a new ``created`` and a new ``system_fingerprint``, as the real APIs do. Each has one
side-effecting tool that appends a line to the file named by ``VOLATILE_SIDE_FILE``: a test counts the effects
a replay had. ``KNOBS`` holds the system prompt and a suffix the tools add to their result, so a test can
record, change either, and replay.

The module is importable as ``volatile_agents`` (tests/ is on ``sys.path``): a replay imports its entrypoints.
"""

from __future__ import annotations

import json
import os
import secrets
import warnings
from pathlib import Path
from typing import Any

import otel_replay as orp

SIDE_FILE_ENV = "VOLATILE_SIDE_FILE"
DEFAULT_KNOBS = {
    "prompt": "You are a weather assistant. Answer in one line.",
    "suffix": "",
    "tool_order": "",  # "reversed": the loops offer their tools in the other order (as a set-built list may)
    "tool_note": "",  # appended to report_weather's description: a changed tool definition
}
KNOBS: dict[str, str] = dict(DEFAULT_KNOBS)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "report_weather",
        "description": "Look up the weather in a city and log the report.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CLOCK_PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def offered(weather: dict[str, Any], clock: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool list a loop sends: ``report_weather`` (described with the ``tool_note`` knob) and ``local_time``,
    in that order, or the other (the ``tool_order`` knob). The fake server calls the first tool offered, so only
    a recorded answer (mock, deterministic) keeps calling ``report_weather`` after the order changed."""
    tools = [_noted(weather), clock]
    return tools[::-1] if KNOBS["tool_order"] == "reversed" else tools


def _noted(tool: dict[str, Any]) -> dict[str, Any]:
    if not KNOBS["tool_note"]:
        return tool
    inner = tool.get("function", tool)
    noted = {**inner, "description": inner["description"] + KNOBS["tool_note"]}
    return {**tool, "function": noted} if "function" in tool else noted


def effects() -> int:
    """Lines the side-effecting tools wrote so far."""
    path = Path(os.environ[SIDE_FILE_ENV])
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def _weather(city: str) -> str:
    with Path(os.environ[SIDE_FILE_ENV]).open("a", encoding="utf-8") as fh:
        fh.write(f"report {city}\n")
    return f"It is sunny in {city}{KNOBS['suffix']}"


@orp.tool("report_weather", risk="write")
def report_weather(city: str) -> str:
    """The tool of the plain SDK loops (write risk: logs the report)."""
    return _weather(city)


# ------------------------------------------------------------------------------- OpenAI tool loop


def _openai_loop(question: str, **extra: Any) -> Any:
    from openai import OpenAI

    client = OpenAI()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": KNOBS["prompt"]},
        {"role": "user", "content": question},
    ]
    for _ in range(4):
        completion = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=messages,
            tools=offered(
                WEATHER_TOOL,
                {
                    "type": "function",
                    "function": {
                        "name": "local_time",
                        "description": "Local time in a city.",
                        "parameters": CLOCK_PARAMETERS,
                    },
                },
            ),
            **extra,
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            return completion
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = report_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise RuntimeError("the model kept calling tools")


@orp.agent("volatile-openai-loop")
def openai_loop(question: str) -> Any:
    """The function-calling loop of the OpenAI docs; returns the final ``ChatCompletion``."""
    return _openai_loop(question)


@orp.agent("volatile-openai-tagged")
def openai_loop_tagged(question: str) -> Any:
    """:func:`openai_loop` sending a reference of its own, new in every run, with each request (``user=``)."""
    return _openai_loop(question, user=f"ref-{secrets.token_hex(8)}")


def openai_ask(messages: list[dict[str, Any]], model: str = "gpt-4o-mini") -> Any:
    """One chat completion, outside any run (the instrumentor records it as a run of one call)."""
    from openai import OpenAI

    return OpenAI().chat.completions.create(model=model, messages=messages)


# ---------------------------------------------------------------------------- OpenAI Responses loop


@orp.agent("volatile-responses-loop")
def responses_loop(question: str) -> str:
    """A tool loop on the Responses API, chaining items by ``call_id``; returns the final text."""
    from openai import OpenAI

    client = OpenAI()
    tool = {
        "type": "function",
        "name": "report_weather",
        "description": "Weather of a city.",
        "parameters": WEATHER_TOOL["function"]["parameters"],
    }
    items: list[Any] = [{"role": "user", "content": question}]
    for _ in range(4):
        clock = {"type": "function", "name": "local_time", "description": "Local time.", "parameters": CLOCK_PARAMETERS}
        response = client.responses.create(
            model="gpt-4o-mini", instructions=KNOBS["prompt"], input=items, tools=offered(tool, clock)
        )
        calls = [i for i in response.output if i.type == "function_call"]
        if not calls:
            return response.output_text
        for call in calls:
            items.append(call.model_dump(exclude_none=True))
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": report_weather(**json.loads(call.arguments)),
                }
            )
    raise RuntimeError("the model kept calling tools")


# --------------------------------------------------------------------------------- Anthropic loop


@orp.agent("volatile-anthropic-loop")
def anthropic_loop(question: str) -> str:
    """The tool-use loop of the Anthropic docs (``toolu_`` ids, ``tool_use_id`` in the tool result)."""
    from anthropic import Anthropic

    client = Anthropic()
    tools = [
        {
            "name": "report_weather",
            "description": "Weather of a city.",
            "input_schema": WEATHER_TOOL["function"]["parameters"],
        }
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(4):
        message = client.messages.create(
            model="claude-fake",
            max_tokens=256,
            system=KNOBS["prompt"],
            messages=messages,
            tools=offered(
                tools[0], {"name": "local_time", "description": "Local time.", "input_schema": CLOCK_PARAMETERS}
            ),
        )
        uses = [b for b in message.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in message.content if b.type == "text")
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": report_weather(**use.input)}
                    for use in uses
                ],
            }
        )
    raise RuntimeError("the model kept calling tools")


# ------------------------------------------------------------------------------ LangGraph ReAct agent


def _langgraph_agent() -> Any:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(city: str) -> str:
        """Look up the weather in a city (logs the report)."""
        return _weather(city)

    get_weather.metadata = {"otel_replay_risk": "write"}
    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0; the README still shows it
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(ChatOpenAI(model="gpt-4o-mini"), [get_weather], prompt=KNOBS["prompt"])


def langgraph_run(input: dict[str, Any]) -> Any:  # noqa: A002 - the implicit run records the graph input as "input"
    """The prebuilt ReAct agent of the LangGraph README, invoked outside any run (the instrumentor begins one
    at ``graph.invoke``); also the ``--app`` entrypoint of its replays. Returns the graph state."""
    return _langgraph_agent().invoke(input)
