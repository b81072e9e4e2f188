"""An async streaming agent on the plain ``openai`` client, as the OpenAI docs' streaming and parallel function
calling guides write one: ``AsyncOpenAI`` with ``stream=True``, the tool calls assembled from the chunks' deltas,
the model asking for two tools at once (parallel tool calls) and the agent running them concurrently with
``asyncio.gather``. The program runs two questions at once (``asyncio.gather`` of two runs), as a server
handling two users would.

Recorded with one line, ``orp.instrument()``, the run's boundary (``@orp.agent``) and the tools' risks
(``@orp.tool``). ``reserve_item`` has a real side effect: a line appended to ``$RW_OUTBOX/reservations.txt``.
``RW_INSTRUCTIONS`` changes the system prompt, as a developer would.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import otel_replay as orp

orp.instrument()  # before the SDK is imported: it is patched as it loads

from openai import AsyncOpenAI  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "check_stock",
            "description": "How many of an item are in stock.",
            "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "reserve_item",
            "description": "Reserve an item for the customer.",
            "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
        },
    },
]


@orp.tool(risk="read")
async def check_stock(item: str) -> str:
    await asyncio.sleep(0)
    return f"3 {item}s in stock"


@orp.tool(risk="write")
async def reserve_item(item: str) -> str:
    await asyncio.sleep(0)
    with open(Path(os.environ["RW_OUTBOX"]) / "reservations.txt", "a") as outbox:
        outbox.write(f"{item}\n")
    return f"{item} reserved"


FUNCTIONS = {"check_stock": check_stock, "reserve_item": reserve_item}


async def _streamed(client: AsyncOpenAI, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """One streamed completion: its text and its tool calls, assembled from the deltas."""
    text, calls = "", {}
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True)
    async for chunk in stream:
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        text += delta.content or ""
        for part in delta.tool_calls or []:
            call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = part.id or call["id"]
            call["name"] = (part.function.name if part.function else None) or call["name"]
            call["arguments"] += (part.function.arguments if part.function else None) or ""
    return text, [calls[i] for i in sorted(calls)]


@orp.agent("parallel-desk")
async def answer(question: str) -> str:
    client = AsyncOpenAI()
    system = os.environ.get("RW_INSTRUCTIONS", "You help customers reserve items.")
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    while True:
        text, calls = await _streamed(client, messages)
        if not calls:
            return text
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ],
            }
        )
        results = await asyncio.gather(*(FUNCTIONS[c["name"]](**json.loads(c["arguments"])) for c in calls))
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": r} for c, r in zip(calls, results)]


async def main() -> None:
    for out in await asyncio.gather(answer("reserve a lamp"), answer("reserve a chair")):
        print(out)


if __name__ == "__main__":
    asyncio.run(main())
