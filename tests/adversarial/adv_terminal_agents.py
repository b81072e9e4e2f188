"""Agents whose recorded names, errors and values are built to drive a terminal when printed."""

from __future__ import annotations

from typing import Any

import otel_replay as orp

TITLE = "\x1b]0;pwned-title\x07"
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
LINK = "\x1b]8;;http://evil.example/\x1b\\click me\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"
MARKUP = "[/oops][bold red]x"
HOSTILE = TITLE + CLIPBOARD + LINK + CLEAR + C1_CSI + "\x07\r" + MARKUP


@orp.tool(name="lookup" + TITLE + MARKUP)
def lookup(key: str) -> dict[str, Any]:
    return {"value": HOSTILE, "key": key}


@orp.agent("hostile" + CLEAR + MARKUP)
def hostile_agent(question: str) -> dict[str, Any]:
    found = lookup(question)
    return {"answer": found["value"] + question}


@orp.agent("hostile-failing" + LINK)
def failing_agent(question: str) -> dict[str, Any]:
    lookup(question)
    raise RuntimeError("it broke " + HOSTILE)


LEAKED_KEY = "sk-proj-" + "Q7w8E9r0T1y2U3i4O5p6" * 2


@orp.agent("leaky-failing")
def leaky_failing_agent(question: str) -> dict[str, Any]:
    """Raises with a live secret and control characters in its message, in the recording and in every replay."""
    lookup(question)
    raise RuntimeError(f"upstream refused key {LEAKED_KEY} " + HOSTILE)
