"""The OpenAI Agents SDK's MCP example (``examples/mcp/filesystem_example``) with the support desk's stdio MCP server
(``rw_mcp_server.py``): ``MCPServerStdio`` as an async context manager, the agent given ``mcp_servers=[server]``,
``Runner.run``. Recorded with one line (``orp.instrument()``: the Agents SDK, the openai client and the MCP
client); ``RW_ZERO_CODE=1`` leaves the line out. ``main(input)`` is what a replay calls
(``--app rw_mcp_agents_sdk_agent:main``). ``RW_INSTRUCTIONS`` changes the agent's instructions, as a developer
would.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":  # 1: under opentelemetry-instrument, with no otel-replay line
    orp.instrument()  # before the SDKs are imported: they are patched as they load

from agents import Agent, Runner
from agents.mcp import MCPServerStdio

SERVER = str(Path(__file__).with_name("rw_mcp_server.py"))


async def main(input: str = "order A-17 arrived damaged") -> str:  # noqa: A002 - Runner.run's name for it
    async with MCPServerStdio(
        name="Support desk", params={"command": sys.executable, "args": [SERVER], "env": dict(os.environ)}
    ) as server:
        agent = Agent(
            name="support",
            instructions=os.environ.get("RW_INSTRUCTIONS", "Use the tools to help the customer."),
            mcp_servers=[server],
        )
        result = await Runner.run(agent, input=input)
        return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(main(*sys.argv[1:2])))
