"""Agents for ``test_adv_repeated_secret.py``: the user pastes a mail API key into the question, and the model's
answer calls ``send_email(to=..., api_key=..., body=...)`` with it (as the key, and again as the body of the
mail: an argument whose name says nothing of a secret).

Two shapes, on the real SDKs against the project's fake OpenAI server (``OPENAI_BASE_URL``, which answers the
first request with a call of the first tool offered, its arguments set by the test):

* ``mail_agent``: the OpenAI Agents SDK, a ``@function_tool`` the SDK calls with the model's arguments;
* ``mail_loop``: a plain tool loop on the ``openai`` client, an ``@otel_replay.tool("send_email")`` the loop
  calls with the arguments it parsed from the model's answer. ``ADV_ECHO_VARIANT`` changes what it passes, as
  an edit of the agent would: ``own-key`` sends the key of its own environment (``ADV_ECHO_MAIL_KEY``, another
  secret) instead of the one the user gave, ``suffixed`` sends the given key with text appended.

They live in their own module so a replay (``--app adv_secret_echo_agents:mail_loop``) can import them again.
``python adv_secret_echo_agents.py agents|loop QUESTION`` records one run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import otel_replay as orp

orp.instrument()

from agents import Agent, Runner, function_tool  # noqa: E402 - after instrument(), as a user writes it

VARIANT_ENV = "ADV_ECHO_VARIANT"
OWN_KEY_ENV = "ADV_ECHO_MAIL_KEY"


@function_tool
def send_email(to: str, api_key: str, body: str) -> str:
    """Send the report to a mailbox with the user's mail API key."""
    return f"report sent to {to}"


agent = Agent(name="mailer", instructions="You mail reports for the user.", tools=[send_email])


async def mail_agent(input: str) -> Any:  # noqa: A002 - Runner.run's name for it, which the run records
    """The OpenAI Agents SDK shape: one ``Runner.run``."""
    result = await Runner.run(agent, input=input)
    return result.final_output


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send the report to a mailbox with the user's mail API key",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "api_key": {"type": "string"}, "body": {"type": "string"}},
                "required": ["to", "api_key", "body"],
            },
        },
    }
]


@orp.tool("send_email")
def send_email_step(to: str, api_key: str, body: str) -> str:
    """The loop's ``send_email`` tool (the Python name differs from the Agents SDK tool's above)."""
    return f"report sent to {to}"


@orp.agent("mail-loop")
def mail_loop(question: str) -> str | None:
    """The plain tool loop shape on the ``openai`` client."""
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    messages: list[Any] = [{"role": "user", "content": question}]
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    message = first.choices[0].message
    messages.append(message)
    for call in message.tool_calls or ():
        args = json.loads(call.function.arguments)
        variant = os.environ.get(VARIANT_ENV)
        if variant == "own-key":
            args["api_key"] = os.environ[OWN_KEY_ENV]
        elif variant == "suffixed":
            args["api_key"] = f"{args['api_key']}-2"
        result = send_email_step(**args)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    final = client.chat.completions.create(model="gpt-4o", messages=messages)
    return final.choices[0].message.content


if __name__ == "__main__":
    shape, question = sys.argv[1], sys.argv[2]
    print(asyncio.run(mail_agent(question)) if shape == "agents" else mail_loop(question))
