"""A LangChain agent whose tools come from an MCP server, as langchain-mcp-adapters' README writes one:
``MultiServerMCPClient`` over stdio, ``client.get_tools()``, ``create_agent(...)``, ``ainvoke``. Recorded with the
two lines our docs ask for: ``orp.instrument()`` (LangChain, the openai client and the MCP client) and the run's
boundary, ``@orp.agent`` (the tools are listed before the agent runs, so the run must hold both).
``RW_INSTRUCTIONS`` sets a system prompt, as a developer would.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import otel_replay as orp

orp.instrument()

from langchain.agents import create_agent  # noqa: E402
from langchain_mcp_adapters.client import MultiServerMCPClient  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

SERVER = str(Path(__file__).with_name("server.py"))
client = MultiServerMCPClient(
    {"desk": {"command": sys.executable, "args": [SERVER], "transport": "stdio", "env": dict(os.environ)}}
)


@orp.agent("mcp-adapters-desk")
async def answer(question: str = "order A-17 arrived damaged") -> str:
    tools = await client.get_tools()
    agent = create_agent(ChatOpenAI(model="gpt-4o-mini"), tools, system_prompt=os.environ.get("RW_INSTRUCTIONS"))
    response = await agent.ainvoke({"messages": [{"role": "user", "content": question}]})
    return str(response["messages"][-1].content)


if __name__ == "__main__":
    print(asyncio.run(answer()))
