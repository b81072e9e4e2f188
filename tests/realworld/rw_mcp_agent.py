"""An MCP agent on the plain ``openai`` client, as the MCP docs' client quickstart writes one: a stdio MCP server
(``rw_mcp_server.py``) started with ``stdio_client``, its tools listed with ``session.list_tools()`` and passed
to chat completions, each tool call the model asks for made with ``session.call_tool()``. The agent also reads a
resource and a prompt of the server into its system prompt.

Recorded with one line, ``orp.instrument()`` (the openai client and the MCP client), and the run's boundary,
``@orp.agent``. ``RW_ZERO_CODE=1`` leaves both out (``opentelemetry-instrument``: the MCP session is then the
run). ``RW_INSTRUCTIONS`` changes the system prompt, as a developer would.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import otel_replay as orp

ZERO_CODE = os.environ.get("RW_ZERO_CODE") == "1"  # under opentelemetry-instrument, with no otel-replay line
if not ZERO_CODE:
    orp.instrument()  # before the SDKs are imported: they are patched as they load

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

SERVER = StdioServerParameters(
    command=sys.executable, args=[str(Path(__file__).with_name("rw_mcp_server.py"))], env=dict(os.environ)
)


def _text(result: object) -> str:
    return "".join(getattr(part, "text", "") for part in getattr(result, "content", None) or [])


QUESTION = "order A-17 arrived damaged"


async def answer(question: str = QUESTION) -> str:
    client = AsyncOpenAI()
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        policy = await session.read_resource("policy://refunds")
        prompt = await session.get_prompt("triage", {"order_id": "A-17"})
        instructions = os.environ.get("RW_INSTRUCTIONS", "You are a support agent.")
        system = "\n".join(
            [instructions, *(c.text for c in policy.contents), *(m.content.text for m in prompt.messages)]
        )
        tools = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in listed.tools
        ]
        messages: list[dict[str, object]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": question},
        ]
        while True:
            reply = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = await session.call_tool(call.function.name, json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": _text(result)})


if not ZERO_CODE:
    answer = orp.agent("mcp-desk")(answer)


if __name__ == "__main__":
    print(asyncio.run(answer(sys.argv[1] if len(sys.argv) > 1 else QUESTION)))
