"""The pre-check of ``Redactor.redact`` leaves out keys already found clean (usage keys such as
``input_token_details`` that always failed it), and still finds every secret on every call."""

from __future__ import annotations

import json

from otel_replay.redaction import Redactor

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2


def _usage_message(content: str) -> dict:
    """A LangChain AIMessage as a recorded graph output holds it: usage keys everywhere."""
    return {
        "$type": "langchain_core.messages.ai.AIMessage",
        "fields": {
            "content": content,
            "id": "run-1",
            "tool_calls": [],
            "response_metadata": {"token_usage": {"completion_tokens": 12, "prompt_tokens": 80, "total_tokens": 92}},
            "usage_metadata": {
                "input_tokens": 80,
                "output_tokens": 12,
                "total_tokens": 92,
                "input_token_details": {"cache_read": 0},
                "output_token_details": {"reasoning": 0},
            },
        },
    }


def test_a_secret_among_usage_keys_is_found_on_every_call() -> None:
    redactor = Redactor(key=b"k" * 32)
    clean = {"messages": [_usage_message("sunny in Lyon")] * 3}
    for _ in range(3):  # the first call walks the tree and finds the keys clean; later calls skip them
        assert redactor.redact(clean, "output") == (clean, 0)
    leaked = {"messages": [_usage_message("sunny in Lyon"), _usage_message(f"my key is {SECRET}")]}
    for _ in range(2):
        tree, n = redactor.redact(leaked, "output")
        assert n == 1 and SECRET not in json.dumps(tree)


def test_a_secret_used_as_a_key_is_found_on_every_call() -> None:
    redactor = Redactor(key=b"k" * 32)
    tree = {"keys": {SECRET: "owner"}, "usage_metadata": {"input_token_details": {"cache_read": 0}}}
    for _ in range(3):
        out, n = redactor.redact(tree, "output")
        assert n == 1 and SECRET not in json.dumps(out)
