"""Usage, token-count and cost fields are never redacted by name, and a recorded SDK answer comes back whole.

Each supported SDK's full usage shape (OpenAI chat completions and Responses, Anthropic messages, LangChain
``AIMessage.usage_metadata``) goes through the redactor unchanged, and through a real recording: a run whose
``@orp.model`` step returns the SDK's own response object is recorded into a real store, the stored model
snapshot is read back and compared, and a mock replay hands the agent an equal object again. The credential
keys that share the word ``token`` stay secret.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Message
from langchain_core.messages import AIMessage
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

import otel_replay as orp
from otel_replay import register_type
from otel_replay.redaction import DEFAULT_SAFE_KEYS, REDACTED_KEY, RedactionConfig, Redactor
from otel_replay.storage.store import Store

# ------------------------------------------------------------------------------------------- the shapes

OPENAI_CHAT_USAGE: dict[str, Any] = {
    "prompt_tokens": 19,
    "completion_tokens": 10,
    "total_tokens": 29,
    "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": 1},
    "completion_tokens_details": {
        "reasoning_tokens": 4,
        "audio_tokens": 2,
        "accepted_prediction_tokens": 1,
        "rejected_prediction_tokens": 2,
    },
}
OPENAI_RESPONSES_USAGE: dict[str, Any] = {
    "input_tokens": 36,
    "output_tokens": 87,
    "total_tokens": 123,
    "input_tokens_details": {
        "cached_tokens": 5,
        "cache_write_tokens": 7,
        "cache_write_tokens_details": {"ttl_30m_tokens": 4, "ttl_12h_tokens": 3},
    },
    "output_tokens_details": {"reasoning_tokens": 12},
}
ANTHROPIC_USAGE: dict[str, Any] = {
    "input_tokens": 2095,
    "output_tokens": 503,
    "cache_creation_input_tokens": 2051,
    "cache_read_input_tokens": 1024,
    "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 51},
    "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 1},
    "service_tier": "standard",
}
LANGCHAIN_USAGE: dict[str, Any] = {
    "input_tokens": 350,
    "output_tokens": 240,
    "total_tokens": 590,
    "input_token_details": {"audio": 10, "cache_creation": 200, "cache_read": 100},
    "output_token_details": {"audio": 10, "reasoning": 200},
}
COSTS: dict[str, Any] = {"cost": 0.0012, "cost_usd": 0.0012, "total_cost": 0.0031}

RESPONSES: dict[str, dict[str, Any]] = {
    "openai-chat": {
        "id": "chatcmpl-usage1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": "Paris.", "refusal": None},
            }
        ],
        "usage": OPENAI_CHAT_USAGE,
        "system_fingerprint": "fp_usage",
        "service_tier": "default",
    },
    "openai-responses": {
        "id": "resp_usage1",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-4.1-mini",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            {
                "type": "message",
                "id": "msg_usage1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
            }
        ],
        "usage": OPENAI_RESPONSES_USAGE,
    },
    "anthropic": {
        "id": "msg_usage1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Paris."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": ANTHROPIC_USAGE,
    },
    "langchain": {
        "content": "Paris.",
        "id": "run-usage1",
        "usage_metadata": LANGCHAIN_USAGE,
        "response_metadata": {
            "token_usage": OPENAI_CHAT_USAGE,
            "model_name": "gpt-4o-mini",
            "finish_reason": "stop",
            **COSTS,
        },
    },
}
CLASSES: dict[str, type] = {
    "openai-chat": ChatCompletion,
    "openai-responses": Response,
    "anthropic": Message,
    "langchain": AIMessage,
}
USAGE_FIELD: dict[str, str] = {
    "openai-chat": "usage",
    "openai-responses": "usage",
    "anthropic": "usage",
    "langchain": "usage_metadata",
}

CREDENTIAL_KEYS = [
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "bearer_token",
    "api_token",
    "token",
    "x-auth-token",
    "X-Auth-Token",
    "session_token",
    "sessionToken",
    "csrf_token",
    "bot_token",
    "oauth_token",
    "ephemeral_token",
    "write_token",
    "token_details",
    "input_access_token",
    "access_tokens",
    "id_tokens",
]


def build(sdk: str) -> Any:
    """The SDK's own response object for ``sdk``, with full usage."""
    return CLASSES[sdk].model_validate(copy.deepcopy(RESPONSES[sdk]))


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(key=b"k" * 32)


# ---------------------------------------------------------------------------------------- the redactor


@pytest.mark.parametrize("sdk", sorted(RESPONSES))
def test_each_sdk_usage_shape_is_unchanged_by_the_redactor(redactor: Redactor, sdk: str) -> None:
    usage = RESPONSES[sdk][USAGE_FIELD[sdk]]
    assert redactor.redact(usage, "model.response.usage") == (usage, 0)
    wrapped = {"response": {"usage": usage, "token_usage": usage, "usage_metadata": usage, **COSTS}}
    assert redactor.redact(wrapped, "model.response") == (wrapped, 0)
    dumped = build(sdk).model_dump(mode="json")  # every field the installed SDK version has, nulls included
    assert redactor.redact(dumped, "model.response") == (dumped, 0)


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)


@pytest.mark.parametrize(
    "key",
    sorted(
        {k for sdk in RESPONSES for k in _keys(RESPONSES[sdk][USAGE_FIELD[sdk]])}
        | set(COSTS)
        | {"token_usage", "usage_metadata", "inputTokenDetails", "prompt_token_count", "cached_token", "total_tokens_1"}
    ),
)
def test_usage_keys_are_not_secret_by_name(redactor: Redactor, key: str) -> None:
    assert not redactor.is_secret_key(key)


@pytest.mark.parametrize("key", CREDENTIAL_KEYS)
def test_credential_token_keys_stay_secret(redactor: Redactor, key: str) -> None:
    assert redactor.is_secret_key(key)
    redacted, count = redactor.redact({"usage": {"input_tokens": 3}, "auth": {key: "opaque-value-123"}}, "s")
    assert count == 1 and "opaque-value-123" not in json.dumps(redacted)
    assert redacted["usage"] == {"input_tokens": 3}


def test_a_secret_under_a_usage_key_is_still_found_by_its_shape(redactor: Redactor) -> None:
    leaked = "sk-proj-" + "Z9y8" * 10
    redacted, count = redactor.redact({"input_token_details": {"audio": leaked}, "cost": f"billed to {leaked}"}, "s")
    assert count == 2 and leaked not in json.dumps(redacted)


def test_the_users_own_key_words_win_over_the_usage_rule_not_over_the_safe_list() -> None:
    custom = Redactor(key=b"k" * 32, config=RedactionConfig(extra_key_words=("prompt_token",)))
    assert custom.is_secret_key("prompt_token") and not custom.is_secret_key("output_token")
    assert not custom.is_secret_key("prompt_tokens")  # a safe key stays safe


def test_the_safe_list_names_every_sdk_usage_key() -> None:
    safe = set(DEFAULT_SAFE_KEYS)
    for sdk in RESPONSES:
        assert set(_keys(RESPONSES[sdk][USAGE_FIELD[sdk]])) <= safe, sdk
    assert {"usage", "usage_metadata", "token_usage", *COSTS} <= safe


# ---------------------------------------------------------------------------------------- the recorder

SEEN: list[Any] = []
"""What the model step handed the agent, per call (recording and replay)."""


@orp.model("answer", provider="test")
def answer_model(sdk: str, messages: list[dict[str, str]]) -> Any:
    return build(sdk)


@orp.agent("usage-agent")
def usage_agent(sdk: str) -> str:
    answer = answer_model(sdk, [{"role": "user", "content": "capital of France?"}])
    SEEN.append(answer)
    return type(answer).__name__


@pytest.fixture
def registered() -> None:
    for cls in CLASSES.values():
        register_type(cls)


@pytest.mark.parametrize("sdk", sorted(RESPONSES))
def test_a_recorded_sdk_answer_is_stored_unredacted_and_replayed_equal(home: Path, registered: None, sdk: str) -> None:
    SEEN.clear()
    usage_agent(sdk)
    orp.flush()
    original = SEEN[-1]
    with Store.open() as store:
        (summary,) = store.runs()
        run = store.load_run(summary.trace_id)
        (step,) = [s for s in run.steps if s.kind == "model"]
        snapshot = next(s for s in step.snapshot_list if s.kind == "model")
        assert snapshot.redactions == 0
        stored = step.snapshots["model"]["response"]
        assert REDACTED_KEY not in json.dumps(stored)
        fields = stored["fields"]
        assert fields[USAGE_FIELD[sdk]] == original.model_dump(mode="python")[USAGE_FIELD[sdk]]
        assert CLASSES[sdk].model_validate(fields) == original
        result = orp.replay(summary.trace_id, mode="mock", store=store)
    assert result.outcome == "matched", result.divergences
    replayed = SEEN[-1]
    assert replayed is not original and type(replayed) is CLASSES[sdk]
    assert replayed == original
    assert getattr(replayed, USAGE_FIELD[sdk]) == getattr(original, USAGE_FIELD[sdk])


CREDENTIALS: dict[str, str] = {key: f"opaque-{i:02d}-Vq7Lm2Xp9Rt4" for i, key in enumerate(CREDENTIAL_KEYS)}


@orp.model("answer-with-credentials", provider="test")
def leaky_model(messages: list[dict[str, str]]) -> AIMessage:
    answer = copy.deepcopy(RESPONSES["langchain"])
    answer["response_metadata"]["issued"] = dict(CREDENTIALS)
    return AIMessage.model_validate(answer)


@orp.agent("leaky-usage-agent")
def leaky_usage_agent(question: str) -> str:
    return str(leaky_model([{"role": "user", "content": question}]).content)


def test_credentials_next_to_usage_are_redacted_in_the_store_and_usage_is_not(home: Path) -> None:
    leaky_usage_agent("capital of France?")
    orp.flush()
    with Store.open() as store:
        (summary,) = store.runs()
        (step,) = [s for s in store.load_run(summary.trace_id).steps if s.kind == "model"]
    fields = step.snapshots["model"]["response"]["fields"]
    assert fields["usage_metadata"] == LANGCHAIN_USAGE
    assert fields["response_metadata"]["token_usage"] == OPENAI_CHAT_USAGE
    assert {k: fields["response_metadata"][k] for k in COSTS} == COSTS
    issued = fields["response_metadata"]["issued"]
    assert set(issued) == set(CREDENTIALS) and all(set(v) == {REDACTED_KEY, "scope"} for v in issued.values())
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(v.encode() in data for v in CREDENTIALS.values()), path
