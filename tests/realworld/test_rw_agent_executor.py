"""LangChain ``AgentExecutor`` + ``create_tool_calling_agent`` with ``ChatOpenAI``
(``rw_agent_executor_agent.py``), recorded with one line or zero-code, replayed through the CLI in every mode
against the fake server with fresh ids per answer."""

from __future__ import annotations

import langchain_classic.agents  # noqa: F401 - a package of the [test] extra: missing, the module fails
import langchain_openai  # noqa: F401 - a package of the [test] extra: missing, the module fails
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

EXECUTOR = Shape(
    script="rw_agent_executor_agent.py",
    app="rw_agent_executor_agent:agent_executor.invoke",
    agent="AgentExecutor",
    tool_app="rw_agent_executor_agent",
)


def test_one_line_recording_replays_in_every_mode(world: RealWorld) -> None:
    """Recorded with ``orp.instrument()``: mock and deterministic match offline; a changed prompt or tool result
    diverges with the message diff; live needs the approval and then matches."""
    recorded = record(world, EXECUTOR, zero_code=False)
    assert_matched_offline(world, EXECUTOR, recorded)
    assert_prompt_change_diverges(world, EXECUTOR, recorded)
    assert_tool_result_change_diverges(world, EXECUTOR, recorded)
    assert_live_replay(world, EXECUTOR, recorded)


def test_zero_code_recording_replays_offline_and_replay_tool_replays_its_tool(world: RealWorld) -> None:
    """Recorded under ``opentelemetry-instrument``: mock and deterministic match offline; ``replay-tool`` answers
    the tool from the recording and runs it only when approved."""
    recorded = record(world, EXECUTOR, zero_code=True)
    assert_matched_offline(world, EXECUTOR, recorded)
    assert_replay_tool(world, EXECUTOR, recorded)
