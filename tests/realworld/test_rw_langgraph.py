"""LangGraph ``create_react_agent`` with ``ChatOpenAI`` (``rw_langgraph_agent.py``), recorded with one line or
zero-code, replayed through the CLI in every mode against the fake server with fresh ids per answer."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("langchain_openai")

from conftest import RealWorld  # noqa: E402
from rw_langchain_checks import (  # noqa: E402
    Shape,
    assert_live_replay,
    assert_matched_offline,
    assert_prompt_change_diverges,
    assert_replay_tool,
    assert_tool_result_change_diverges,
    record,
)

LANGGRAPH = Shape(script="rw_langgraph_agent.py", app="rw_langgraph_agent:agent.invoke", agent="LangGraph",
                  tool_app="rw_langgraph_agent")


@pytest.mark.parametrize("zero_code", [False, True], ids=["orp.instrument", "opentelemetry-instrument"])
def test_one_run_replays_offline_with_no_request_and_no_effect(world: RealWorld, zero_code: bool) -> None:
    recorded = record(world, LANGGRAPH, zero_code=zero_code)
    assert_matched_offline(world, LANGGRAPH, recorded)


def test_changed_prompt_and_changed_tool_result_diverge_with_the_message_diff(world: RealWorld) -> None:
    recorded = record(world, LANGGRAPH, zero_code=False)
    assert_prompt_change_diverges(world, LANGGRAPH, recorded)
    assert_tool_result_change_diverges(world, LANGGRAPH, recorded)


def test_live_replay_needs_the_approval_and_matches(world: RealWorld) -> None:
    recorded = record(world, LANGGRAPH, zero_code=False)
    assert_live_replay(world, LANGGRAPH, recorded)


def test_replay_tool_replays_the_langgraph_tool(world: RealWorld) -> None:
    recorded = record(world, LANGGRAPH, zero_code=True)
    assert_replay_tool(world, LANGGRAPH, recorded)
