"""An agent and a tool whose recorded names carry terminal escapes and HTML, for the lab's hostile-input tests
(imported by name: tests/ is on the path of the lab's processes)."""

from __future__ import annotations

from typing import Any

import otel_replay as orp

HOSTILE = "evil\x1b]0;pwned\x07\x1b[31m<script>alert(1)</script>"
"""A name that would retitle the terminal, colour it and run a script, if anything printed it raw."""


@orp.tool(HOSTILE + "-tool", risk="read")
def hostile_tool(text: str) -> str:
    """Echo the text (a pure function)."""
    return text + HOSTILE


@orp.agent(HOSTILE)
def hostile_agent(text: str) -> dict[str, Any]:
    """Return what the hostile tool answers."""
    return {"answer": hostile_tool(text)}
