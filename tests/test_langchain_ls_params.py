"""The provider and model of a LangChain model step come from what LangChain worked out for the call (its
LangSmith params, which ``generate`` puts in the run manager's metadata) instead of asking the model again.

What must hold: a ``ChatOpenAI`` step records provider ``openai`` and the requested model, a per-call model
override (``bind(model=...)``) included; a model whose own ``metadata`` names a LangSmith key (which LangChain
merges over the params) still records what the model's ``_get_ls_params`` says, not that metadata; and the
request hash does not change with where the params were read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import langchain_openai
import pytest
from fake_llm_servers import FakeLLMServer

import otel_replay as orp
from otel_replay import semconv
from otel_replay.instrumentation.langchain import LangChainInstrumentor
from otel_replay.storage.store import Store

KEY = "sk-test-" + "3" * 32


@pytest.fixture
def server(home: Path) -> Iterator[FakeLLMServer]:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument()
    try:
        with FakeLLMServer() as fake:
            yield fake
    finally:
        instrumentor.uninstrument()


def _model_steps(agent: str) -> list[Any]:
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs(agent=agent, kind="original")
        return [s for s in store.load_run(summary.trace_id).steps if s.kind == "model"]


def test_chat_openai_steps_record_provider_and_model_with_a_per_call_override(server: FakeLLMServer) -> None:
    @orp.agent("ls-params")
    def agent() -> None:
        model = langchain_openai.ChatOpenAI(model="gpt-4o-mini", base_url=server.openai_url, api_key=KEY)
        model.invoke("weather in Lyon?")
        model.bind(model="gpt-4.1-mini").invoke("weather in Lyon?")

    agent()
    first, second = _model_steps("ls-params")
    assert first.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    assert first.attributes[semconv.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert second.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    assert second.attributes[semconv.GEN_AI_REQUEST_MODEL] == "gpt-4.1-mini"
    assert first.snapshots["model"]["request"]["params"]["model"] == "gpt-4o-mini"
    assert second.snapshots["model"]["request"]["params"]["model"] == "gpt-4.1-mini"


def test_model_metadata_naming_a_langsmith_key_does_not_replace_the_model(server: FakeLLMServer) -> None:
    @orp.agent("ls-shadow")
    def agent() -> None:
        plain = langchain_openai.ChatOpenAI(model="gpt-4o-mini", base_url=server.openai_url, api_key=KEY)
        shadowed = langchain_openai.ChatOpenAI(
            model="gpt-4o-mini",
            base_url=server.openai_url,
            api_key=KEY,
            metadata={"ls_model_name": "shadow-model", "ls_provider": "shadow"},
        )
        plain.invoke("weather in Lyon?")
        shadowed.invoke("weather in Lyon?")

    agent()
    plain, shadowed = _model_steps("ls-shadow")
    for step in (plain, shadowed):
        assert step.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
        assert step.attributes[semconv.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert plain.attributes[semconv.MODEL_REQUEST_HASH] == shadowed.attributes[semconv.MODEL_REQUEST_HASH]
