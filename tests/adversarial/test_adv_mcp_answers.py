"""Adversarial: a recorded MCP result is hostile data. A mock replay rebuilds it as the type of the method that
returned it (``CallToolResult`` for ``tools/call``), never as a type the data names, and a recorded value that is
not of that type stops the replay: it is never handed to the agent, and nothing is sent to the server.

The run is recorded genuinely (``test_instrument_mcp``: the real ``mcp`` client and server over streamable HTTP),
planted again with its tool result edited (``adv_code_agents.plant``), and replayed from the real store with the
server stopped.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import test_instrument_mcp as agents
from adv_code_agents import plant

import otel_replay as orp
from otel_replay.instrumentation import uninstrument
from otel_replay.storage.store import Store

HOSTILE: dict[str, Any] = {
    "not the type": {"content": "not a list of blocks", "isError": "maybe"},
    "names a class": {"$type": "dataclass", "class": "os:system", "fields": {"command": "touch /tmp/owned"}},
    "a text": "order A-1: delivered",
}


@pytest.mark.parametrize("form", sorted(HOSTILE))
def test_a_recorded_mcp_result_that_is_no_call_tool_result_stops_the_replay(home: Path, form: str) -> None:
    orp.instrument("mcp")
    try:
        with agents._Served("http") as base:
            agents.URL["http"] = f"{base}/mcp"
            asyncio.run(agents.ask_http("http", ["lookup_order"]))
        orp.flush()
        with Store.open(home=home) as store:
            (summary,) = store.runs(agent="mcp-http", kind="original")
            spans = store.load_spans(summary.trace_id)

        def hostile(kind: str, decoded: dict[str, Any]) -> dict[str, Any] | None:
            if kind != "tool":
                return None
            return {**decoded, "result": HOSTILE[form]}

        planted = plant(home, spans, payload=hostile)
        calls = dict(agents.CALLS)
        result = orp.replay(planted, mode="mock", entrypoint="test_instrument_mcp:ask_http")
    finally:
        uninstrument("mcp")
    assert result.outcome == "diverged"
    assert result.agent_error is None  # the replay stopped; the agent was never handed the value
    reasons = " ".join(d.reason for d in result.divergences)
    assert "is no CallToolResult" in reasons, result.divergences
    assert calls == agents.CALLS and not Path("/tmp/owned").exists()
