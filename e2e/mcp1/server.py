"""An MCP server as mcp 1.x's docs write one (``FastMCP`` over stdio), for the langchain-mcp-adapters agent of
``e2e/test_mcp1.py``: ``lookup_order`` only reads and says so (``readOnlyHint``); ``file_ticket`` has a real side
effect (a line appended to ``$RW_OUTBOX/tickets.txt``). Each tool call notes the ``traceparent`` its request
carried in ``params._meta`` (``$RW_TRACE_LOG``)."""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("Support desk")


def _note_trace(ctx: Context) -> None:
    meta = ctx.request_context.meta
    extra = getattr(meta, "model_extra", None) or {}
    log = os.environ.get("RW_TRACE_LOG")
    if log:
        with open(log, "a") as out:
            out.write(f"{extra.get('traceparent')}\n")


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_order(order_id: str, ctx: Context) -> str:
    """The status of an order."""
    _note_trace(ctx)
    return f"order {order_id}: delivered, damaged in transit"


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def file_ticket(order_id: str, note: str, ctx: Context) -> str:
    """File a support ticket about an order."""
    _note_trace(ctx)
    with open(Path(os.environ["RW_OUTBOX"]) / "tickets.txt", "a") as outbox:
        outbox.write(f"{order_id}: {note}\n")
    return f"ticket filed for {order_id}"


if __name__ == "__main__":
    mcp.run(transport="stdio")
