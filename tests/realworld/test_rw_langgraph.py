"""LangGraph ``create_react_agent`` with ``ChatOpenAI`` (``rw_langgraph_agent.py``), recorded with one line or
zero-code, replayed through the CLI in every mode against the fake server with fresh ids per answer."""

from __future__ import annotations

import langchain_openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
import langgraph.prebuilt  # noqa: F401 - a package of the [test] extra: missing, the module fails
from conftest import RealWorld
from rw_langchain_checks import (
    Shape,
    assert_live_replay,
    assert_matched_offline,
    assert_prompt_change_diverges,
    assert_replay_tool,
    assert_tool_result_change_diverges,
    record,
)

LANGGRAPH = Shape(
    script="rw_langgraph_agent.py",
    app="rw_langgraph_agent:agent.invoke",
    agent="LangGraph",
    tool_app="rw_langgraph_agent",
)


def test_one_line_recording_replays_in_every_mode(world: RealWorld) -> None:
    """Recorded with ``orp.instrument()``: mock and deterministic match offline; a changed prompt or tool result
    diverges with the message diff; live needs the approval and then matches."""
    recorded = record(world, LANGGRAPH, zero_code=False)
    assert_matched_offline(world, LANGGRAPH, recorded)
    assert_prompt_change_diverges(world, LANGGRAPH, recorded)
    assert_tool_result_change_diverges(world, LANGGRAPH, recorded)
    assert_live_replay(world, LANGGRAPH, recorded)


def test_zero_code_recording_replays_offline_and_replay_tool_replays_its_tool(world: RealWorld) -> None:
    """Recorded under ``opentelemetry-instrument``: mock and deterministic match offline; ``replay-tool`` answers
    the tool from the recording and runs it only when approved."""
    recorded = record(world, LANGGRAPH, zero_code=True)
    assert_matched_offline(world, LANGGRAPH, recorded)
    assert_replay_tool(world, LANGGRAPH, recorded)
