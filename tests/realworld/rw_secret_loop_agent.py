"""A plain tool loop whose conversation carries a secret, on the ``openai`` or the ``anthropic`` client.

The user's question, or the ``lookup_account`` tool's result, holds a GitHub token; the recording stores it as
an inline ``[REDACTED:github_token:…]`` token inside the string. The tool reads the token from the
environment (``RW_ACCOUNT_TOKEN``), as a live replay must. ``RW_PROVIDER``: ``openai`` (chat completions),
``anthropic`` (``messages.create``) or ``anthropic-stream`` (``messages.create``, then the ``messages.stream``
helper for the answer). ``python rw_secret_loop_agent.py QUESTION`` runs :func:`main` once.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import otel_replay as orp

orp.instrument()

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "lookup_account",
            "description": "The account record of a user, with its access token",
            "parameters": {"type": "object", "properties": {"user": {"type": "string"}}, "required": ["user"]},
        },
    }
]
TOOLS_ANTHROPIC = [
    {
        "name": "lookup_account",
        "description": "The account record of a user, with its access token",
        "input_schema": {"type": "object", "properties": {"user": {"type": "string"}}, "required": ["user"]},
    }
]


@orp.tool
def lookup_account(user: str) -> str:
    """The account record; the token comes from the current environment."""
    return f"user {user}, token {os.environ.get('RW_ACCOUNT_TOKEN', '')}"


def _openai(question: str) -> str | None:
    import json

    from openai import OpenAI

    client = OpenAI(max_retries=0)
    messages: list[Any] = [{"role": "user", "content": question}]
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS_OPENAI, tool_choice="auto")
    message = first.choices[0].message
    messages.append(message)
    for call in message.tool_calls or ():
        result = lookup_account(**json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    final = client.chat.completions.create(model="gpt-4o", messages=messages)
    return final.choices[0].message.content


def _anthropic(question: str, *, stream: bool) -> str:
    import anthropic

    client = anthropic.Anthropic(
        base_url=os.environ["RW_ANTHROPIC_URL"], api_key="sk-ant-test-not-a-key", max_retries=0
    )
    messages: list[Any] = [{"role": "user", "content": question}]
    first = client.messages.create(model="claude-fake-1", max_tokens=256, tools=TOOLS_ANTHROPIC, messages=messages)
    messages.append({"role": "assistant", "content": first.content})
    results = [
        {"type": "tool_result", "tool_use_id": b.id, "content": lookup_account(**b.input)}
        for b in first.content
        if b.type == "tool_use"
    ]
    messages.append({"role": "user", "content": results})
    if stream:
        with client.messages.stream(model="claude-fake-1", max_tokens=256, messages=messages) as answer:
            return answer.get_final_message().content[0].text
    final = client.messages.create(model="claude-fake-1", max_tokens=256, messages=messages)
    return final.content[0].text


@orp.agent("secret-loop-agent")
def main(question: str) -> str | None:
    """One question through the loop of ``RW_PROVIDER``."""
    provider = os.environ.get("RW_PROVIDER", "openai")
    if provider == "openai":
        return _openai(question)
    return _anthropic(question, stream=provider == "anthropic-stream")


if __name__ == "__main__":
    print(main(" ".join(sys.argv[1:]) or "Look up the account of ada"))
