"""An agent that talks on stdout while it works, as many do: progress prints, a library writing to file
descriptor 1, a tool that logs what it looks up."""

from __future__ import annotations

import os
import sys
from typing import Any

import otel_replay as orp


@orp.tool(risk="read")
def lookup_stock(item: str) -> dict[str, Any]:
    print(f"tool looking up {item}")
    return {"item": item, "stock": 3}


@orp.agent("chatty-agent")
def chatty_agent(item: str) -> dict[str, Any]:
    print("chatty agent starting")
    sys.stdout.write("written to sys.stdout\n")
    sys.stdout.flush()
    os.write(1, b"written to file descriptor 1\n")
    found = lookup_stock(item)
    return {"answer": f"{found['stock']} {item} left"}
