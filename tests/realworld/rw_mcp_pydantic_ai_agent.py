"""A Pydantic AI agent whose tools come from an MCP server, as Pydantic AI's docs write one: an ``MCPToolset``
over stdio (the fastmcp client, ``pydantic-ai-slim[mcp]``) in ``Agent(toolsets=[...])``, ``run_sync``. The server
is ``rw_mcp_server.py`` (a read-only tool and a side-effecting one). Recorded with one line, ``orp.instrument()``
(Pydantic AI and the MCP client among the SDKs it turns on); ``RW_ZERO_CODE=1`` leaves the line out.
``RW_INSTRUCTIONS`` changes the agent's instructions, as a developer would.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import otel_replay as orp

if os.environ.get("RW_ZERO_CODE") != "1":  # 1: under opentelemetry-instrument, with no otel-replay line
    orp.instrument()

from fastmcp.client.transports import PythonStdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

SERVER = Path(__file__).with_name("rw_mcp_server.py")
toolset = MCPToolset(PythonStdioTransport(SERVER, env=dict(os.environ)))
agent = Agent(
    "openai:gpt-4o-mini",
    name="mcp-support-desk",
    toolsets=[toolset],
    instructions=os.environ.get("RW_INSTRUCTIONS", "Use the tools to help the customer."),
)


if __name__ == "__main__":
    print(agent.run_sync(sys.argv[1] if len(sys.argv) > 1 else "order A-17 arrived damaged").output)
