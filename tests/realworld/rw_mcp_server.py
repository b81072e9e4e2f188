"""An MCP server as the MCP Python SDK's docs write one (``MCPServer``, formerly FastMCP, run over stdio), for
the MCP agents of ``tests/realworld/``.

``lookup_order`` only reads and says so (``readOnlyHint``); ``file_ticket`` has a real side effect (a line
appended to ``$RW_OUTBOX/tickets.txt``) and is annotated neither read-only nor destructive. Each tool call
notes the ``traceparent`` its request carried in ``params._meta`` (``$RW_TRACE_LOG``), so a test can see the
agent's trace reach the server. ``policy://refunds`` is a resource, ``triage`` a prompt.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("Support desk")


def _note_trace(ctx: Context) -> None:
    log = os.environ.get("RW_TRACE_LOG")
    meta = ctx.request_context.meta
    parent = meta.get("traceparent") if meta is not None else None
    if log:
        with open(log, "a") as out:
            out.write(f"{parent}\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_order(order_id: str, ctx: Context) -> str:
    """The status of an order."""
    _note_trace(ctx)
    return f"order {order_id}: delivered, damaged in transit"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def file_ticket(order_id: str, note: str, ctx: Context) -> str:
    """File a support ticket about an order."""
    _note_trace(ctx)
    with open(Path(os.environ["RW_OUTBOX"]) / "tickets.txt", "a") as outbox:
        outbox.write(f"{order_id}: {note}\n")
    return f"ticket filed for {order_id}"


@server.resource("policy://refunds")
def refund_policy() -> str:
    """The refund policy."""
    return "Damaged orders are refunded in full."


@server.prompt()
def triage(order_id: str) -> str:
    """How to handle a complaint about an order."""
    return f"Check order {order_id}, then file a ticket."


if __name__ == "__main__":
    server.run()
