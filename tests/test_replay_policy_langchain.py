"""A replay policy's model overrides on a LangChain chat model (the instrumented ``_generate_with_cache``): a
replaced system prompt is a request divergence at the first model step in a deterministic replay, and reaches
the chat model itself in a whatif replay."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import otel_replay as orp
from otel_replay.instrumentation.langchain import LangChainInstrumentor
from otel_replay.replay.matching.policy import ReplayPolicy
from otel_replay.storage.store import Store

SEEN: list[dict[str, Any]] = []
"""What the chat model really received, one entry per real call."""


class EchoSystemModel(BaseChatModel):
    """Answers with the system prompt it was given (and the keyword arguments it was called with)."""

    @property
    def _llm_type(self) -> str:
        return "echo-system"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        system = next((m.content for m in messages if m.type == "system"), "")
        SEEN.append({"system": system, "kwargs": dict(kwargs)})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"system said: {system}"))])


@orp.agent("policy-langchain-agent")
def langchain_agent(question: str) -> str:
    """One chat model call with a system prompt."""
    reply = EchoSystemModel().invoke([SystemMessage(content="Be helpful."), HumanMessage(content=question)])
    return str(reply.content)


@pytest.fixture(autouse=True)
def instrumented() -> Iterator[None]:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()
    SEEN.clear()


def test_a_system_prompt_override_reaches_a_langchain_chat_model(home: Path) -> None:
    assert langchain_agent("hi") == "system said: Be helpful."
    orp.flush()
    with Store.open() as store:
        tid = store.runs(agent="policy-langchain-agent", kind="original")[0].trace_id
    policy = ReplayPolicy(prompts={"system": "Be terse."})

    deterministic = orp.replay(tid, mode="deterministic", policy=policy)
    first = deterministic.first_divergence
    assert (first.kind, first.step_index) == ("request", 0) and "Be terse." in (first.diff or "")
    assert len(SEEN) == 1  # answered from the recording: the model was not called

    whatif = orp.replay(tid, mode="whatif", reason="prompt check", policy=ReplayPolicy(prompts={"system": "Be terse."}))
    assert SEEN[1:] == [{"system": "Be terse.", "kwargs": {}}]
    assert whatif.replay.snapshots["output"]["answer"] == "system said: Be terse."
    assert [d.kind for d in whatif.divergences] == ["output"]

    orp.replay(tid, mode="whatif", reason="param check", policy=ReplayPolicy(params={"top_k": 3}))
    assert SEEN[2:] == [{"system": "Be helpful.", "kwargs": {"top_k": 3}}]
